"""Celery with the Redis broker and its prefork pool.

Settings: results ignored (no backend), prefetch multiplier 64 (Celery's advice for
many short tasks), ``--without-gossip --without-mingle --without-heartbeat``.

The io workload runs one worker per process with the gevent pool (``-P gevent -c N``),
the pool Celery's concurrency guide names for I/O-bound tasks ("hundreds, or thousands
of green threads" where prefork runs a few processes per CPU). gevent installs from
wheels and Celery monkey-patches at start, so the task's ``time.sleep`` yields; the
threads pool would do the same work with OS threads and more switching.
"""

from __future__ import annotations

import os

from celery import Celery

from peers._runner import (
    COUNTER,
    arguments,
    client,
    python_bin,
    run,
    version,
    wait_then_incr_sync,
)

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


@app.task
def wait_then_incr() -> None:
    wait_then_incr_sync()


def main() -> None:
    args = arguments()

    job = wait_then_incr if args.workload == "io" else incr

    def enqueue(count: int) -> None:
        with app.producer_or_acquire() as producer:
            for _ in range(count):
                job.apply_async(producer=producer)

    common = [
        "--loglevel",
        "WARNING",
        "--without-gossip",
        "--without-mingle",
        "--without-heartbeat",
    ]
    worker = [python_bin("celery"), "-A", "peers.celery", "worker"]
    if args.workload == "io":
        pool = ["--pool", "gevent", "--concurrency", str(args.per_process)]
        run(
            "Celery",
            version("celery", "kombu", "redis", "gevent"),
            f"{args.concurrency} workers, -P gevent -c {args.per_process} each",
            enqueue,
            [
                [*worker, *pool, *common, "--hostname", f"bench{i}@%h"]
                for i in range(args.concurrency)
            ],
            args,
            in_flight=args.concurrency * args.per_process,
        )
        return
    command = [*worker, "--pool", "prefork", "--concurrency", str(args.concurrency), *common]
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
