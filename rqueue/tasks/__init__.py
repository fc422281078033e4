"""Tasks: defining, naming, finding and calling them.

- ``decorator``: ``@task`` and the registry it fills; ``definition``: :class:`Task`
  and :class:`PendingDispatch`, dispatching one call or many (``dispatch_many``);
  ``options``: :class:`TaskOptions`, the one definition of every task option (what
  ``@task``, ``using()``, workflow steps and schedules read); ``validation``: the
  checks of options, callables and times; ``handles``: ``Dispatched`` and
  ``TaskHandle``; ``interception``: where ``rqueue.testing`` takes dispatches instead
  of Redis; ``observers``: what every send passes before it is encoded (tracing);
  ``hooks``: calling ``after_succeeded``/``after_failed``; ``debouncing``: sending a
  debounced task's call (``@task(debounce=)``) and refusing it where every call runs.
- ``names``: what a task is called and which names are rqueue's own;
  ``registry``: finding a task by the name a payload carries (importing only
  registered modules).
- ``arguments``: checking a call's arguments before they leave the process;
  ``current``: ``current_job()``, the running attempt's job; ``progress``: where
  ``current_job().progress()`` reports go (a worker's Redis, a test's memory);
  ``awaiting``: running an ``async def`` task, hook or listener from sync code;
  ``iterable``: the driver of ``@task(iterable=True)`` (a generator's cursors
  checkpointed and resumed), which keeps them where the context's keeper says.
- ``whereabouts``: where a task is now, by its id (``rqueue status``, the dashboard's
  task page); it alone also reads ``failed`` records and the workers' registry
  (``metrics``), modules of its own layer.

May import: ``encoding``, ``settings``, ``store``, ``errors``, ``middleware``, ``text``
and ``timing``. Never ``worker``, ``testing``, ``cli`` or ``web``: they sit above.
"""
