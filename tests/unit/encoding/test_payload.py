"""Payload encoding: the fixed header the Lua scripts rely on, round trips, refusals."""

from __future__ import annotations

import struct
from dataclasses import replace
from datetime import datetime, timedelta, timezone

import apptasks
import msgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rqueue.encoding.payload import Job, decode, encode, new_id
from rqueue.errors import InvalidPayload, PayloadTooLarge, UnserializableArgument
from rqueue.settings.config import Config
from rqueue.store.header import (
    ATTEMPTS_OFFSET,
    HEADER_SIZE,
    ID_OFFSET,
    RAW_ID_LENGTH,
    TIMEOUT_OFFSET,
    has_header,
    payload_attempts,
    payload_id,
    with_attempts,
)
from rqueue.store.queue import RedisQueue


def make_job(**changes: object) -> Job:
    job = Job(id=new_id(), task="apptasks:record", args=(1,), kwargs={}, queue="default")
    return replace(job, **changes)  # type: ignore[arg-type]


def test_header_fields_sit_at_the_offsets_the_lua_scripts_patch() -> None:
    job = make_job(attempts=0x01020304, timeout=2.5)
    data = encode(job)
    assert (ATTEMPTS_OFFSET, TIMEOUT_OFFSET, ID_OFFSET, HEADER_SIZE) == (2, 7, 13, 29)
    assert data[0] == 0x99  # fixarray of 9: the element count never changes the offsets
    assert struct.unpack_from(">I", data, ATTEMPTS_OFFSET)[0] == 0x01020304
    assert struct.unpack_from(">I", data, TIMEOUT_OFFSET)[0] == 2500
    assert data[ID_OFFSET : ID_OFFSET + RAW_ID_LENGTH] == bytes.fromhex(job.id)
    # The Lua scripts compare these exact bytes before patching (see header.lua).
    assert (data[1], data[6], data[11], data[12]) == (0xCE, 0xCE, 0xC4, 16)
    # It is still an ordinary msgpack array whose first elements are the fixed ones.
    fields = msgpack.unpackb(data, raw=False, timestamp=3)
    assert fields[:3] == [0x01020304, 2500, bytes.fromhex(job.id)]
    assert fields[3:6] == [job.task, job.queue, job.dispatched_at]


def test_a_plain_call_stores_no_option_it_does_not_set() -> None:
    # issue 16: every pending task is in Redis, so a plain call's payload is its fields
    # and nothing else: an empty options map, no key names.
    data = encode(make_job(args=(), dispatched_at=1.5))
    assert msgpack.unpackb(data)[6:] == [[], {}, {}]
    assert len(data) == HEADER_SIZE + len("apptasks:record") + 1 + len("default") + 1 + 9 + 3
    options = msgpack.unpackb(encode(make_job(tries=3, backoff=(5.0,))))[8]
    assert options == {"tries": 3, "backoff": [5.0]}


def test_header_offsets_do_not_move_with_the_arguments() -> None:
    small = encode(make_job(args=()))
    large = encode(make_job(args=("x" * 100_000,), kwargs={f"k{i}": i for i in range(40)}))
    assert small[:ATTEMPTS_OFFSET] == large[:ATTEMPTS_OFFSET]
    assert payload_attempts(large) == 0 and payload_id(large) is not None


def test_reserve_script_increments_attempts_in_place(queue: RedisQueue) -> None:
    # 0x000000ff + 1 carries into the next byte: the patch is a real 32-bit big-endian add.
    original = encode(make_job(attempts=0xFF, timeout=3))
    queue.push("default", [original])
    reservation = queue.reserve("default", 1, 60_000, 0, 0)
    (reserved,) = reservation.payloads
    assert reserved == with_attempts(original, 0x100)
    assert payload_attempts(reserved) == 0x100
    assert payload_id(reserved) == payload_id(original)
    # Only the four attempt bytes differ.
    diff = [i for i, (a, b) in enumerate(zip(original, reserved, strict=True)) if a != b]
    assert diff and all(ATTEMPTS_OFFSET <= i < ATTEMPTS_OFFSET + 4 for i in diff)
    assert decode(reserved) == replace(decode(original), attempts=0x100)
    # The reservation expiry used the timeout read at TIMEOUT_OFFSET (3 s), not the default.
    score = queue.client.zscore(queue.keys("default").reserved, reserved)
    assert score == reservation.now_ms + 3000


def test_round_trip_keeps_every_field_and_argument_type() -> None:
    when = datetime(2027, 1, 1, 12, 30, 15, 123456, tzinfo=timezone(timedelta(hours=2)))
    args = (
        1,
        -(2**63),
        2**64 - 1,
        0.1,
        1e308,
        -0.0,
        "héllo ✓",
        b"\x00\xffbytes",
        None,
        True,
        [1, [2, [3]]],
        {"nested": {"list": [1.5, b"x"]}, "n": None},
        when,
    )
    kwargs = {"user_id": 42, "when": datetime(2026, 5, 1, tzinfo=timezone.utc), "blob": b"\x01"}
    job = make_job(
        args=args,
        kwargs=kwargs,
        attempts=2,
        tries=5,
        timeout=12.5,
        backoff=(1.0, 2.5),
        queue="emails",
        dispatched_at=1700000000.25,
        meta={"trace": "abc"},
    )
    decoded = decode(encode(job))
    assert decoded == job
    assert isinstance(decoded.args[7], bytes)
    assert decoded.args[12] == when and decoded.args[12].tzinfo is not None
    assert decoded.kwargs["when"] == kwargs["when"]


def test_tuples_come_back_as_lists() -> None:
    decoded = decode(encode(make_job(args=((1, 2),), kwargs={"t": (3,)})))
    assert decoded.args == ([1, 2],) and decoded.kwargs == {"t": [3]}


def test_no_timeout_is_encoded_as_zero_and_decoded_as_none() -> None:
    data = encode(make_job(timeout=None))
    assert struct.unpack_from(">I", data, TIMEOUT_OFFSET)[0] == 0
    assert decode(data).timeout is None


json_like = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**64 - 1)
    | st.floats(allow_nan=False)
    | st.text(max_size=20)
    | st.binary(max_size=20),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=12,
)


@settings(max_examples=60, deadline=None)
@given(
    args=st.lists(json_like, max_size=4),
    kwargs=st.dictionaries(st.text(max_size=8), json_like, max_size=3),
    attempts=st.integers(0, 2**32 - 1),
)
def test_any_msgpack_value_round_trips(
    args: list[object], kwargs: dict[str, object], attempts: int
) -> None:
    job = make_job(args=tuple(args), kwargs=kwargs, attempts=attempts)
    data = encode(job)
    assert decode(data) == job
    assert payload_attempts(data) == attempts
    assert decode(with_attempts(data, 7)) == replace(job, attempts=7)


@pytest.mark.parametrize(
    ("args", "kwargs", "path", "hint"),
    [
        ((1, object()), {}, "args[1]", "object"),
        ((), {"user": {"when": datetime(2027, 1, 1)}}, "kwargs['user']['when']", "naive"),
        (([1, {2, 3}],), {}, "args[0][1]", "set"),
        ((2**64,), {}, "args[0]", "64 bits"),
        ((), {"d": {object(): 1}}, "kwargs['d'] key", "object"),
    ],
)
def test_unencodable_argument_is_named(
    args: tuple[object, ...], kwargs: dict[str, object], path: str, hint: str
) -> None:
    with pytest.raises(UnserializableArgument) as raised:
        encode(make_job(args=args, kwargs=kwargs))
    assert path in str(raised.value) and hint in str(raised.value)
    assert "apptasks:record" in str(raised.value)


def test_unencodable_argument_is_refused_at_dispatch_and_nothing_is_stored(
    queue: RedisQueue,
) -> None:
    with pytest.raises(UnserializableArgument, match=r"kwargs\['value'\]\['callback'\]"):
        apptasks.record.dispatch(value={"callback": print})
    with pytest.raises(UnserializableArgument, match=r"args\[0\]"):
        apptasks.record.later(10, object())
    with pytest.raises(UnserializableArgument, match=r"args\[0\]"):
        apptasks.record.dispatch_many([(1,), (object(),)])
    assert queue.client.keys("queues:*") == []


def test_payload_over_the_size_limit_is_refused_at_dispatch(config: Config) -> None:
    small = RedisQueue(replace(config, max_payload_bytes=1000))
    small.client.flushall()
    limited = apptasks.record.using(connection=small)
    assert limited.dispatch("x" * 500).id
    with pytest.raises(PayloadTooLarge, match=r"over the limit of 1000"):
        limited.dispatch("x" * 1000)
    with pytest.raises(PayloadTooLarge):
        limited.dispatch_many([("a",), ("x" * 2000,)])
    assert small.client.llen("queues:default") == 1
    small.client.close()


def test_size_limit_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RQUEUE_MAX_PAYLOAD_BYTES", "4096")
    assert Config.resolve().max_payload_bytes == 4096
    with pytest.raises(PayloadTooLarge):
        encode(make_job(args=("x" * 5000,)), Config.resolve().max_payload_bytes)


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"garbage",
        msgpack.packb({"task": "apptasks:record", "args": []}),
        encode(make_job())[:-3],  # header intact, body truncated
        with_attempts(encode(make_job()), 0)[:HEADER_SIZE]
        + msgpack.packb("task")
        + msgpack.packb(5),
    ],
    ids=["empty", "garbage", "no-header", "truncated", "wrong-shape"],  # ids vary per run
)
def test_bytes_that_are_not_a_task_raise_invalid_payload(data: bytes) -> None:
    with pytest.raises(InvalidPayload):
        decode(data)


def test_header_helpers_leave_foreign_bytes_alone() -> None:
    assert not has_header(b"x" * 100)
    assert payload_id(b"x" * 100) is None
    assert payload_attempts(b"x" * 100) == 0
    assert with_attempts(b"x" * 100, 3) == b"x" * 100


def test_backoff_list_gives_one_delay_per_retry_and_repeats_the_last() -> None:
    job = make_job(backoff=(5.0, 30.0, 120.0))
    assert [job.backoff_for(n) for n in (1, 2, 3, 4, 9)] == [5.0, 30.0, 120.0, 120.0, 120.0]
    assert make_job().backoff_for(1) == 0.0
