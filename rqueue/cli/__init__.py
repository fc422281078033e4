"""The ``rqueue`` command: a thin layer over the Python API, one module per command.

- ``argv``: masks credentials in the process's command line, first thing on import.
- ``common``: the :data:`main` group and what every command shares
  (``--redis-url``/``--prefix``, errors as exit codes, escaped output, tables).
- ``work``: ``rqueue work``, a worker pool.
- ``queues``: ``size``, ``clear``, ``restart`` and ``cancel``.
- ``failed``: ``rqueue failed ...`` (list, show, retry, forget, flush).
- ``schedule``: ``rqueue schedule ...`` (list, show, add, update, pause, resume,
  remove, run-now).
- ``status``: ``rqueue status TASK_ID``, a kept task's status and result or error.
- ``batches``: ``rqueue batches ...`` (list, show, cancel, retry, prune).
- ``server``: ``rqueue server``, an embedded redis-server for development.
- ``demo``: ``rqueue demo``; ``demo_runner``: the end-to-end run behind it.

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

from rqueue.cli import batches, demo, failed, queues, schedule, server, status, work  # noqa: E402
from rqueue.cli.common import main  # noqa: E402

for _command in (
    work.work,
    queues.size,
    queues.clear,
    queues.restart,
    queues.cancel,
    failed.failed,
    schedule.schedule_group,
    status.status,
    batches.batches,
    server.server,
    demo.demo,
):
    main.add_command(_command)

__all__ = ["main"]
