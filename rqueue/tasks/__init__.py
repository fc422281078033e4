"""Tasks: defining, naming, finding and calling them.

- ``task``: ``@task``, :class:`Task` and dispatching a call.
- ``names``: what a task is called and which names are rqueue's own;
  ``registry``: finding a task by the name a payload carries (importing only
  registered modules).
- ``arguments``: checking a call's arguments before they leave the process;
  ``current``: ``current_job()``, the running attempt's job; ``awaiting``: running an
  ``async def`` task, hook or listener from sync code.

May import: ``encoding``, ``settings``, ``store``, ``errors``, ``events``, ``text`` and
``timing``. Never ``worker``, ``testing``, ``cli`` or ``web``: they sit above.
"""
