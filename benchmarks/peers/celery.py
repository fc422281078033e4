"""Celery with the Redis broker and its prefork pool.

Settings: results ignored (no backend), prefetch multiplier 64 (Celery's advice for
many short tasks), ``--without-gossip --without-mingle --without-heartbeat``.
"""

from __future__ import annotations

import os

from celery import Celery

from peers._runner import COUNTER, arguments, client, python_bin, run, version

app = Celery("bench", broker=os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0"))
app.conf.update(
    task_ignore_result=True,
    worker_prefetch_multiplier=64,
    broker_connection_retry_on_startup=True,
    worker_hijack_root_logger=False,
)


@app.task
def incr() -> None:
    client().incr(COUNTER)


def main() -> None:
    args = arguments()

    def enqueue(count: int) -> None:
        with app.producer_or_acquire() as producer:
            for _ in range(count):
                incr.apply_async(producer=producer)

    command = [
        python_bin("celery"),
        "-A",
        "peers.celery",
        "worker",
        "--pool",
        "prefork",
        "--concurrency",
        str(args.concurrency),
        "--loglevel",
        "WARNING",
        "--without-gossip",
        "--without-mingle",
        "--without-heartbeat",
    ]
    run(
        "Celery",
        version("celery", "kombu", "redis"),
        f"1 worker, prefork pool of {args.concurrency}",
        enqueue,
        [command],
        args,
    )


if __name__ == "__main__":
    # Run as the importable module, so task names match what the workers import.
    from peers import celery as this

    this.main()
