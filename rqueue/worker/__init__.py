"""The worker: a parent process that supervises children that run tasks.

- ``supervisor``: the parent (``rqueue work``): spawns and reaps children, moves due
  delayed tasks, fires schedules, enforces deadlines, handles signals.
- ``child``: one child's loop: claim a batch of reserved tasks, hand each to the
  lifecycle, give back what it will not run, wait for work; ``reservations``: those
  batches (``Reserved``), reading ahead, and the acks carried by the next reserve call;
  ``member_counts``: batch members' counts, sent just before the call carrying their acks.
- ``lifecycle``: one attempt from admission to its settled outcome (admit, prepare,
  start, look up, call, settle), the same in every mode; ``attempt``: the
  :class:`Attempt` it carries and the ``Participant`` hook surface; ``rules``: the
  failure rules as named predicates; ``verdicts``: what an attempt that raised comes
  to (skipped, cancelled, refused, released, failed; retried or not), decided once for every
  mode, the inline runner's too; ``outcomes``: whether and when a failure is retried
  (``retry_in``, ``retry_delay``), reporting it or a refusal (retry it, or file it);
  ``reports``: the application's participants (the task's hooks, the app's
  listeners), told each outcome once it is settled and logged; ``releases``: who released a task;
  ``admission``: which payloads may run; ``workflow``: a workflow's part in an attempt,
  ``stored``: whether its result can be stored.
- ``concurrent``: the ``ConcurrentRunner``, which runs ``async def`` tasks on an
  event loop (``--slots``) and, with ``--threads``, sync tasks in threads, settling
  each through the lifecycle.
- ``participants``: which features take part in an attempt (``Roster``), and metrics
  as one of them; ``unique_locks`` and ``max_exceptions``: two more;
  ``iteration``: an iterable task's checkpoints in a child (re-arming its time limit,
  seeing a warm stop) and the participant that forgets them.
- ``scoreboard``: shared memory where each child says what it runs, for the parent;
  ``scoreboard_views``: what a slot says (its states, the views the parent reads).
- ``cancels``: the parent's watch for cancels of running tasks (signals the child
  running one, kills it past the grace).
- ``recovery``: giving back or failing what a dead child held;
  ``parent_failures``: the internal task that runs hooks for tasks the parent failed.
- ``timeouts``: per-task time limits; ``process``: a child's OS-level guards;
  ``interrupts``: the idle waits a signal may cut short, in the parent and the child;
  ``options``: :class:`WorkerOptions`; ``logs``: log set-up and the per-task log line;
  ``queue_order``: which queues a reserve call tries; ``running_now``: what the
  children run, for the registry.
- ``pools``: ``rqueue supervise``, pools of worker parents from one config file,
  scaled by load.

May import: the task layer (``tasks``, ``encoding``, ``events``, ``failed``,
``middleware``, ``workflows``), ``metrics``, ``schedules``, ``store`` and
``settings``/``errors``. Never ``cli``.
"""
