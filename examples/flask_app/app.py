"""A Flask app that dispatches a task from a route and waits for its result.

Run it (from this folder, with rqueue and Flask installed, and a Redis at REDIS_URL,
e.g. ``rqueue server`` in another terminal)::

    flask --app app run --port 5000       # the API
    rqueue work                           # in another terminal: runs tasks.count_words

    curl -X POST -H 'content-type: application/json' -d '{"text": "to be or not"}' \\
        http://127.0.0.1:5000/words                       # {"id": "5f0c..."}
    curl http://127.0.0.1:5000/words/5f0c...              # {"words": 4}

Flask serves WSGI and the dashboard is an ASGI app: run ``rqueue dashboard`` beside it.
tests/integration/recipes/test_recipes_flask.py runs all of this.
"""

import re

import tasks
from flask import Flask, abort, request

from rqueue import result_of

app = Flask(__name__)


@app.post("/words")
def count_words() -> tuple[dict[str, str], int]:
    handle = tasks.count_words.dispatch(request.get_json()["text"])
    return {"id": handle.id}, 202


@app.get("/words/<task_id>")
def word_count(task_id: str) -> tuple[dict[str, int | str], int]:
    if not re.fullmatch(r"[0-9a-f]{32}", task_id):
        abort(404)
    try:
        return {"words": result_of(task_id, queue="default").result(timeout=10)}, 200
    except TimeoutError:
        return {"error": "not counted yet: try again"}, 504
