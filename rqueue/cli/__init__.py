"""The ``rqueue`` command: a thin layer over the Python API, one module per command.

- ``argv``: masks credentials in the process's command line, first thing on import.
- ``common``: the :data:`main` group and what every command shares
  (``--redis-url``/``--prefix``, errors as exit codes, escaped output, tables).
- ``work``: ``rqueue work``, a worker pool.
- ``supervise``: ``rqueue supervise``, every pool of the pools file, scaled by load.
- ``queues``: ``size``, ``clear``, ``pause``, ``resume``, ``restart`` and ``cancel``.
- ``failed``: ``rqueue failed ...`` (list, show, retry, forget, flush).
- ``schedule``: ``rqueue schedule ...`` (list, show, add, update, pause, resume,
  remove, run-now).
- ``status``: ``rqueue status TASK_ID``, a kept task's status, progress and result or
  error.
- ``events``: ``rqueue events [QUEUES...]``, the queues' task events as they happen.
- ``batches``: ``rqueue batches ...`` (list, show, cancel, retry, prune).
- ``workers``: ``rqueue workers``, the running workers and what each child runs now.
- ``monitor``: ``rqueue monitor QUEUES --max N``, sizes and oldest waits, exit 1 when
  over (for cron alerts).
- ``metrics``: ``rqueue metrics --port``, a Prometheus endpoint.
- ``dashboard``: ``rqueue dashboard``, the web dashboard (``rqueue.web``).
- ``server``: ``rqueue server``, an embedded redis-server for development.
- ``demo``: ``rqueue demo``; ``demo_runner``: the end-to-end run behind it.
- ``key``: ``rqueue key generate``, a new key for encrypted tasks.

The CLI sits at the top: it may import anything in rqueue (``worker``, ``schedules``,
``workflows``, ``failed``, ``store``, ``task``, ``config``), and nothing in rqueue
imports it. The command modules import ``common`` and not each other; this file adds
them to :data:`main`. Commands needing a heavy module only when run (the supervisor, the
embedded server, the demo runner) import it inside the command, so ``rqueue --help``
stays fast.
"""

# First, before the command modules load: a password on the command line is visible
# to every user in ps until this runs (see argv.py).
from rqueue.cli.argv import hide_credentials

hide_credentials()

from rqueue.cli import (  # noqa: E402
    batches,
    dashboard,
    demo,
    events,
    failed,
    key,
    metrics,
    monitor,
    queues,
    schedule,
    server,
    status,
    supervise,
    work,
    workers,
)
from rqueue.cli.common import main  # noqa: E402

for _command in (
    work.work,
    supervise.supervise,
    queues.size,
    queues.clear,
    queues.pause,
    queues.resume,
    queues.restart,
    queues.cancel,
    failed.failed,
    schedule.schedule_group,
    status.status,
    events.events,
    batches.batches,
    server.server,
    dashboard.dashboard,
    workers.workers,
    monitor.monitor,
    metrics.metrics,
    demo.demo,
    key.key,
):
    main.add_command(_command)

__all__ = ["main"]
