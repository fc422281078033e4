"""RQ: forking ``Worker`` (a fork per job) or ``SimpleWorker``, one ``rq worker`` per process.

Settings: ``--burst --quiet``, jobs enqueued with ``enqueue_many`` and ``result_ttl=0``
(no result kept, the task returns nothing). RQ runs one job at a time per worker
process, whatever the workload: processes are its only concurrency.
"""

from __future__ import annotations

from peers._runner import (
    COUNTER,
    arguments,
    client,
    python_bin,
    run,
    version,
    wait_then_incr_sync,
)

QUEUE = "bench"


def incr() -> None:
    client().incr(COUNTER)


def wait_then_incr() -> None:
    wait_then_incr_sync()


def main() -> None:
    args = arguments(("fork", "simple"))
    from redis import Redis
    from rq import Queue

    job = wait_then_incr if args.workload == "io" else incr

    def enqueue(count: int) -> None:
        queue = Queue(QUEUE, connection=Redis.from_url(args.redis_url))
        for start in range(0, count, 1000):
            queue.enqueue_many(
                [Queue.prepare_data(job, result_ttl=0) for _ in range(min(1000, count - start))]
            )

    command = [python_bin("rq"), "worker", "--burst", "--quiet", "--url", args.redis_url]
    if args.variant == "simple":
        command += ["--worker-class", "rq.worker.SimpleWorker"]
    name = "RQ (SimpleWorker)" if args.variant == "simple" else "RQ (Worker, fork per job)"
    run(
        name,
        version("rq", "redis"),
        f"{args.concurrency} x `rq worker --burst`",
        enqueue,
        [[*command, QUEUE] for _ in range(args.concurrency)],
        args,
        in_flight=args.concurrency,
    )


if __name__ == "__main__":
    # Run as the importable module, so task names match what the workers import.
    from peers import rq as this

    this.main()
