"""Failed tasks and queue sizes at scale (#16): pages, chunked retry and flush, search
past the first window, and ``rqueue size`` over many queues, through the real CLI.

The queues here hold a few hundred records, enough for several windows of
:data:`rqueue.failed.CHUNK` and steps of :data:`~rqueue.failed.STEP`; docs/benchmarks.md
measures the same paths at a million.
"""

from __future__ import annotations

import pytest
from support import cli, ready

from rqueue.encoding.payload import Job, decode, encode, new_id
from rqueue.failed import CHUNK, PAGE, STEP, FailedTasks, make_record
from rqueue.metrics.read import SIZES_PER_CALL
from rqueue.settings.config import Config
from rqueue.store.header import payload_attempts
from rqueue.store.queue import RedisQueue

MANY = 2 * CHUNK + CHUNK // 2
"""Two full chunks and a half one."""


def fill(queue: RedisQueue, count: int, name: str = "default") -> list[str]:
    """``count`` failed records of ``name``, as workers write them (fail.lua), oldest
    first; their task ids in that order."""
    ids = []
    for i in range(count):
        job = Job(new_id(), "apptasks:record", (i,), {}, name, attempts=3, tries=3)
        payload = encode(job)
        queue.fail(name, payload, make_record(name, payload, "ValueError", f"{i}", job=job), True)
        ids.append(job.id)
    queue.remember_queues([name])
    return ids


def listed(output: str) -> list[str]:
    """The ids in the table ``rqueue failed list`` printed."""
    return [line.split()[0] for line in output.strip().splitlines()[1:] if line != "(none)"]


def test_list_shows_the_newest_page_and_how_to_see_the_next(
    queue: RedisQueue, config: Config
) -> None:
    ids = fill(queue, 120)
    first = cli(config, "failed", "list")
    assert first.returncode == 0, first.stderr
    assert listed(first.stdout) == ids[::-1][:PAGE]
    assert f"1-{PAGE} of 120 failed task(s)." in first.stderr
    assert f"Next page: rqueue failed list --offset {PAGE}" in first.stderr
    last = cli(config, "failed", "list", "--offset", "100", "--limit", "30")
    assert listed(last.stdout) == ids[19::-1]
    assert "101-120 of 120 failed task(s)." in last.stderr
    assert "Next page" not in last.stderr
    middle = cli(config, "failed", "list", "--offset", "10", "--limit", "5")
    assert listed(middle.stdout) == ids[109:104:-1]
    assert "Next page: rqueue failed list --offset 15 --limit 5" in middle.stderr
    past = cli(config, "failed", "list", "--offset", "500")
    assert past.returncode == 0 and "(none)" in past.stdout
    assert "Nothing past offset 500: there are 120 failed task(s)." in past.stderr


def test_a_page_spans_queues_in_name_order_and_keeps_the_queue_filter(
    queue: RedisQueue, config: Config
) -> None:
    alpha = fill(queue, 3, "alpha")
    beta = fill(queue, 4, "beta")
    fill(queue, 2, "gamma")
    page = cli(config, "failed", "list", "--limit", "5")
    assert listed(page.stdout) == alpha[::-1] + beta[:1:-1]
    assert "1-5 of 9 failed task(s)." in page.stderr
    rest = cli(config, "failed", "list", "--offset", "5", "--limit", "3", "--queue", "beta")
    assert listed(rest.stdout) == []
    assert "Nothing past offset 5: there are 4 failed task(s)." in rest.stderr
    filtered = cli(config, "failed", "list", "--limit", "3", "--queue", "beta", "--queue", "gamma")
    assert listed(filtered.stdout) == beta[:0:-1]
    assert "Next page: rqueue failed list --offset 3 --limit 3 --queue beta --queue gamma" in (
        filtered.stderr
    )


def test_a_page_reads_only_its_window(queue: RedisQueue) -> None:
    ids = fill(queue, MANY)
    FailedTasks(queue).page(limit=1)  # loads the script: a NOSCRIPT try is not logged below
    queue.client.config_set("slowlog-log-slower-than", 0)  # log every command, with its args
    queue.client.slowlog_reset()
    try:
        page = FailedTasks(queue).page(offset=CHUNK + 7, limit=3)
        logged = queue.client.slowlog_get(128)
    finally:
        queue.client.config_set("slowlog-log-slower-than", 10_000)
    assert [f.id for f in page.records] == ids[::-1][CHUNK + 7 : CHUNK + 10]
    assert (page.total, page.offset, page.end, page.unreadable) == (MANY, CHUNK + 7, CHUNK + 10, 0)
    commands = [entry["command"].split() for entry in logged]
    keys = queue.keys("default")
    reads = [words[2:] for words in commands if words[0] == b"EVALSHA"]  # read_failed.lua
    window = [str(n).encode() for n in (CHUNK + 7, CHUNK + 9, 1)]  # ranks from the newest
    assert reads == [[b"2", keys.failed.encode(), keys.failed_lookup.encode(), b"window", *window]]


@pytest.mark.parametrize(
    ("args", "option"),
    [
        (("--limit", "0"), "--limit"),
        (("--limit", "many"), "--limit"),
        (("--offset", "-1"), "--offset"),
        (("--offset", "1.5"), "--offset"),
    ],
)
def test_a_bad_limit_or_offset_is_a_usage_error_naming_it(
    config: Config, args: tuple[str, ...], option: str
) -> None:
    result = cli(config, "failed", "list", *args)
    assert result.returncode == 2
    assert f"Invalid value for '{option}'" in result.stderr


def test_show_retry_and_forget_find_records_past_the_first_window(
    queue: RedisQueue, config: Config
) -> None:
    ids = fill(queue, MANY)
    oldest = cli(config, "failed", "show", ids[0])  # in the last window scanned
    assert oldest.returncode == 0, oldest.stderr
    assert f"id:        {ids[0]}" in oldest.stdout and "args:      [0]" in oldest.stdout
    # Near the oldest end, and near the newest (each removed from the end it is nearer).
    retried = cli(config, "failed", "retry", ids[5], ids[-3])
    assert retried.returncode == 0, retried.stderr
    assert [decode(p).id for p in ready(queue)] == [ids[5], ids[-3]]
    for gone in (ids[1], ids[-2]):
        forgot = cli(config, "failed", "forget", gone)
        assert forgot.returncode == 0, forgot.stderr
    left = [f.id for f in FailedTasks(queue).iterate()]
    assert left == [i for i in ids[::-1] if i not in {ids[5], ids[-3], ids[1], ids[-2]}]


def test_retry_all_goes_chunk_by_chunk_and_skips_what_does_not_decode(
    queue: RedisQueue, config: Config
) -> None:
    ids = fill(queue, MANY)
    queue.client.linsert(
        queue.keys("default").failed,
        "BEFORE",
        queue.client.lindex(queue.keys("default").failed, CHUNK + 1),
        b"\xc1 not a record",
    )
    others = fill(queue, 2, "emails")
    result = cli(config, "failed", "retry", "--all")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == f"Retried {MANY + 2} failed task(s)."
    progress = result.stderr.splitlines()  # one line per script call
    assert len(progress) == -(-(MANY + 1) // STEP)
    assert progress[0] == f"default: {STEP} of {MANY + 1} looked at, {STEP} retried"
    assert progress[-1].startswith(f"default: {MANY + 1} of {MANY + 1} looked at, ")
    assert sum(int(line.split()[-2]) for line in progress) == MANY
    payloads = ready(queue)
    assert [decode(p).id for p in payloads] == ids  # in the order they failed
    assert {payload_attempts(p) for p in payloads} == {0}
    assert [decode(p).id for p in ready(queue, "emails")] == others
    keys = queue.keys("default")
    assert queue.client.lrange(keys.failed, 0, -1) == [b"\xc1 not a record"]
    assert queue.client.zcard(keys.failed_lookup) == 1


def test_retry_all_stopped_after_one_chunk_loses_nothing_and_runs_again(
    queue: RedisQueue,
) -> None:
    ids = fill(queue, MANY)
    failed = FailedTasks(queue)
    chunks = failed.retry_chunks()
    assert next(chunks).done == STEP
    chunks.close()  # as if the command were killed between two script calls
    assert [decode(p).id for p in ready(queue)] == ids[:STEP]
    assert [f.id for f in failed.iterate()] == ids[: STEP - 1 : -1]
    assert failed.retry_all() == MANY - STEP
    assert [decode(p).id for p in ready(queue)] == ids


def test_flush_goes_chunk_by_chunk_and_stopped_keeps_the_newest(
    queue: RedisQueue, config: Config
) -> None:
    ids = fill(queue, MANY)
    failed = FailedTasks(queue)
    chunks = failed.flush_chunks()
    assert next(chunks) == (("default", STEP, STEP, MANY))
    chunks.close()
    assert [f.id for f in failed.iterate()] == ids[: STEP - 1 : -1]
    result = cli(config, "failed", "flush")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == f"Flushed {MANY - STEP} failed task(s)."
    held = MANY - STEP
    steps = [*range(STEP, held, STEP), held]
    assert result.stderr.splitlines() == [
        f"default: {seen} of {held} looked at, {seen - before} flushed"
        for before, seen in zip([0, *steps], steps, strict=False)
    ]
    keys = queue.keys("default")
    assert queue.client.exists(keys.failed_lookup, keys.failed) == 0
    assert queue.known_queues() == ["default"]


def test_size_streams_many_queues_and_matches_a_pattern(queue: RedisQueue, config: Config) -> None:
    names = [f"tenant-{i:04d}" for i in range(2 * SIZES_PER_CALL + 7)]
    queue.remember_queues([*names, "other"])
    queue.push("tenant-0003", [encode(Job(new_id(), "apptasks:record", (1,), {}, "tenant-0003"))])
    fill(queue, 2, "tenant-0505")
    everything = cli(config, "size")
    assert everything.returncode == 0, everything.stderr
    rows = {line.split()[0]: line.split()[1:] for line in everything.stdout.splitlines()[1:]}
    assert sorted(rows) == sorted([*names, "other"])
    assert rows["tenant-0003"] == ["1", "0", "0", "0"]
    assert rows["tenant-0505"] == ["0", "0", "0", "2"]
    matched = cli(config, "size", "--match", "tenant-05*")
    assert [line.split()[0] for line in matched.stdout.splitlines()[1:]] == names[500:]
    nothing = cli(config, "size", "--match", "nobody-*")
    assert nothing.returncode == 0 and nothing.stdout.splitlines()[1:] == ["(none)"]
