"""The store: the only part that knows Redis keys, Lua scripts and connections.

- ``keys``: every key name, per queue and global, in one place.
- ``lua/*.lua`` and ``scripts``: each state change of a task as one script, run by SHA.
- ``queue``: :class:`RedisQueue`, the one object everyone else holds and calls, and the
  values its methods take and return. It is composed of its roles: ``producer``
  (queueing tasks), ``consumer`` (a worker's reserve, ack, release, fail, waits) and
  ``admin`` (the registry, sizes, pause, clear), over ``base`` (connections, scripts,
  key names). ``calls`` is the one place that lays out each of their scripts' KEYS
  and ARGV (one typed builder per script), so no method assembles them by hand.
- ``wire``: the lean connection the hot path (dispatch, reserve, ack) uses.
- ``connect``: opening a client from a :class:`~rqueue.settings.config.Config`;
  ``default``: the process's default connection.
- ``header``: the payload's fixed header, the bytes the scripts read and patch.
- ``signing``: the HMAC every pushed payload carries when a secret is set, applied
  here because every path that queues a task passes through the store.
- ``cancel``: cancelling a task by id (a pending one at once, a running one by a
  request its worker delivers); ``retry``: riding out a Redis outage;
  ``debounce``: what a debounced dispatch did, read from debounce.lua's reply.
- ``failed_store`` and ``schedule_store``: the Redis side of :mod:`rqueue.failed` and
  :mod:`rqueue.schedules`, as named operations on bytes, so those modules never name
  a key or a script; likewise ``batch_store`` (a workflow batch's state), ``guards``
  (the built-in middleware's state), ``results`` (reading a kept result),
  ``progress`` (a running task's latest progress), ``checkpoints`` (an iterable
  task's checkpoint) and ``live_events`` (following the
  queues' streams of task events; ``lua/events.lua`` adds to them). Each of them calls
  its scripts from one named function per operation.
- ``browse``: reading a queue's tasks a window at a time (ready, delayed, running,
  recently finished) for the dashboard; it only reads.
- ``cluster``, ``sentinel``, ``waits`` and ``probe``: Redis Cluster and Sentinel
  connections, waiting on many queues' keys, and reading many lists at once.

May import: ``rqueue.settings.config``, ``rqueue.errors``, redis-py and msgpack. Nothing here
imports from ``task``, ``worker``, ``schedules`` or ``cli``: those sit above and call in.
"""
