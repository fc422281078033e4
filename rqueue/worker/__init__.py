"""The worker: a parent process that supervises children that run tasks.

- ``supervisor``: the parent (``rqueue work``): spawns and reaps children, moves due
  delayed tasks, fires schedules, enforces deadlines, handles signals.
- ``child``: one child's loop: reserve a batch, run each task, report its outcome;
  ``outcomes``: retrying or failing a task, and calling its hooks.
- ``reservations``: batches of reserved tasks, reading ahead and acking in the next call.
- ``scoreboard``: shared memory where each child says what it runs, for the parent;
  ``scoreboard_views``: what a slot says (its states, the views the parent reads).
- ``recovery``: giving back or failing what a dead child held;
  ``parent_failures``: the internal task that runs hooks for tasks the parent failed.
- ``timeouts``: per-task time limits; ``process``: a child's OS-level guards;
  ``interrupts``: the idle waits a signal may cut short, in the parent and the child;
  ``options``: :class:`WorkerOptions`; ``logs``: log set-up and the per-task log line.

May import: the task layer (``task``, ``registry``, ``payload``, ``events``,
``failed``), ``schedules``, ``store`` and ``config``/``errors``. Never ``cli``.
"""
