"""One module per page of the dashboard, each with its ``routes``.

A handler that reads Redis is a plain ``def``: Starlette runs it in a thread, so a
slow read never holds up the event loop. An action is an ``async def`` that reads
its form through :func:`rqueue.web.auth.action_form` (read-only mode, CSRF) and
runs its Redis calls in a thread, then redirects back (POST, redirect, GET).
"""
