"""Worker pools from one config file, scaled by load: what ``rqueue supervise`` runs.

- ``config``: the file (``[tool.rqueue]`` in pyproject.toml, or an rqueue.toml), read
  and checked once into :class:`~rqueue.worker.pools.config.Pool` values.
- ``plan``: each pool's worker parents (one, or one a queue) and their command lines.
- ``scaling``: how many children each parent should run, from the queues' load; pure.
- ``load``: that load, read from Redis.
- ``status``: each pool's targets and last decision, in Redis for ``rqueue workers``
  and the dashboard.
- ``supervisor``: the process that runs every parent, scales and restarts them.

It sits beside ``rqueue.worker``, whose options it checks a pool's against and whose
``rqueue work`` processes it runs; nothing below imports it.
"""
