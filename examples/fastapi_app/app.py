"""A FastAPI app that dispatches a task, awaits its result, and mounts the dashboard.

Run it (from this folder, with rqueue[web] and FastAPI installed, and a Redis at
REDIS_URL, e.g. ``rqueue server`` in another terminal)::

    export RQUEUE_DASHBOARD_TOKEN=$(python -c 'import secrets; print(secrets.token_hex())')
    uvicorn app:app --port 8000           # the API, and the dashboard at /rqueue/
    rqueue work                           # in another terminal: runs tasks.count_words

    curl -X POST -H 'content-type: application/json' -d '{"text": "to be or not"}' \\
        http://127.0.0.1:8000/words                       # {"id": "5f0c..."}
    curl http://127.0.0.1:8000/words/5f0c...              # {"words": 4}

Open http://127.0.0.1:8000/rqueue/ and type the token in. Without a worker the
second call answers 504 after 10 s: the task waits in Redis until one runs it.
tests/integration/recipes/test_recipes_fastapi.py runs all of this.
"""

import os
from typing import Annotated

import tasks
from fastapi import FastAPI, HTTPException, Path
from pydantic import BaseModel

from rqueue import result_of
from rqueue.web import create_app

app = FastAPI()
app.mount("/rqueue", create_app(token=os.environ["RQUEUE_DASHBOARD_TOKEN"]))


class Text(BaseModel):
    text: str


@app.post("/words", status_code=202)
async def count_words(body: Text) -> dict[str, str]:
    handle = await tasks.count_words.dispatch_async(body.text)  # never blocks the loop
    return {"id": handle.id}


@app.get("/words/{task_id}")
async def word_count(task_id: Annotated[str, Path(pattern="^[0-9a-f]{32}$")]) -> dict[str, int]:
    handle = result_of(task_id, queue="default")
    try:
        return {"words": await handle.result_async(timeout=10)}
    except TimeoutError:
        raise HTTPException(504, "not counted yet: try again") from None
