"""The web dashboard: an ASGI app (Starlette, Jinja2, server-side SVG charts).

It sits at the top, beside the CLI (layer 6 of docs/architecture.md): it only calls
rqueue's Python API (:class:`~rqueue.store.queue.RedisQueue`,
:class:`~rqueue.failed.FailedTasks`, :mod:`rqueue.schedules`, the batches of
:mod:`rqueue.workflows`, the readers of :mod:`rqueue.metrics`, and the two reads
``rqueue status`` and ``rqueue batches list`` use too: ``store.results`` and
``BatchStore.listed``, and the windows of ``store.browse``), never Lua or key names, and
nothing in rqueue imports it.
``rqueue dashboard`` serves it with uvicorn; :func:`create_app` is what a FastAPI,
Starlette or Django (ASGI) app mounts.

- ``app``: :func:`create_app`, the routes, the static files and ``/metrics``.
- ``auth``: the token, the signed session cookie, CSRF and read-only mode.
- ``render``: the Jinja2 templates (autoescaped) and the filters that make text read
  from Redis fit to show.
- ``charts``: line charts as SVG, drawn on the server.
- ``failed_search``: finding failed tasks by text, task name or tag, and acting on
  every match.
- ``task_lists``: a queue's lists of tasks (ready, delayed, running, finished,
  failed), read a window at a time through ``store.browse`` and decoded, each entry
  that does not decode shown as such.
- ``state``: what the page handlers read off the app (the queue, the renderer).
- ``pages/``: one module per page: overview, queues, a queue's tasks (queue_tasks),
  workers, failed, schedules, batches, a task (tasks) and a task name (task_names).
"""

from rqueue.web.app import create_app

__all__ = ["create_app"]
