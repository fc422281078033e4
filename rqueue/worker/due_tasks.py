"""The worker parent's move of its queues' due tasks back to their ready lists.

Each tick the parent sends one migrate.lua call per queue, pipelined (delayed tasks
now due, expired reservations, aged priority levels), and learns when the next
delayed task is due, to wake up for it. On Redis Cluster those calls go to several
shards, and one shard may be down while the others serve: its queues' calls fail
alone (``ClusterPipeline`` gives a node's connection error to that node's commands)
and those queues are left for a back-off (``outages.py``), while the other queues'
due tasks move on time; its wait for the next due time leaves them out too. Only when
no queue answered is the outage raised, for the parent to back off as a whole (one
server down).
"""

from __future__ import annotations

from collections.abc import Sequence

from rqueue.store.outages import Outages
from rqueue.store.queue import RedisQueue
from rqueue.store.retry import REDIS_ERRORS
from rqueue.workflows.dependencies import drain


class DueTasks:
    """Moves due tasks back to ready, queue by queue, a down shard's queues left out."""

    def __init__(self, queue: RedisQueue, queues: Sequence[str], aging: float) -> None:
        self.queue = queue
        self.queues = queues
        self.aging = aging
        self.outages = Outages()

    def migrate(self, longest: float) -> float:
        """Move due tasks back to the lists; return seconds until the next is due (or a
        down queue's back-off ends), at most ``longest``."""
        wait = longest
        queues = self.outages.up(self.queues)
        migrations = self.queue.migrate_each(queues, aging=self.aging)
        cluster = self.queue.config.cluster
        settled = self.outages.settle(queues, migrations, cluster)
        for name, migration in zip(queues, settled, strict=True):
            if migration is None:
                continue  # its shard is down
            if migration.notices:  # tasks waiting for its tasks (workflows/dependencies.py)
                drain(self.queue, name)
            if migration.next_due_ms is not None:
                wait = min(wait, max(0.0, (migration.next_due_ms - migration.now_ms) / 1000))
        return min(wait, self.outages.next_try())

    def wait(self, seconds: float) -> bool:
        """Block until a delayed push to a queue that is up moves its due time earlier
        (True) or ``seconds`` pass (False). On Redis Cluster a shard's outage ends the
        wait early (True: the next tick finds its queues and leaves them out); on one
        server it is raised, for the parent to back off."""
        queues = self.outages.up(self.queues)
        try:
            return bool(queues) and self.queue.wait_for_timer(queues, seconds) is not None
        except REDIS_ERRORS:
            if not self.queue.config.cluster:
                raise
            return True
