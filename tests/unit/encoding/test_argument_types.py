"""Argument types beyond msgpack's own (issue 13): Decimal, UUID, date, time, timedelta
and registered types travel as msgpack extension types, exactly; unknown types are
still refused at dispatch; hostile extension bytes fail their task alone."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta, timezone
from decimal import Decimal
from typing import Any
from uuid import UUID
from zoneinfo import ZoneInfo

import msgpack
import pytest
import typed_tasks as typed
from hypothesis import given, settings
from hypothesis import strategies as st
from support import Workers, strings

from rqueue import register_type
from rqueue.encoding.codec import MAX_DEPTH, REGISTERED, pack, unpack
from rqueue.encoding.payload import Job, decode, encode, new_id
from rqueue.errors import InvalidPayload, UnserializableArgument
from rqueue.failed import FailedTasks
from rqueue.store.header import with_attempts
from rqueue.store.queue import RedisQueue

UTC_MINUS_5 = timezone(timedelta(hours=-5, minutes=-30))
BUILT_IN = (
    Decimal("0.10"),
    Decimal("-0"),
    Decimal("1E+999999"),
    Decimal("Infinity"),
    UUID("12345678-1234-5678-1234-567812345678"),
    date(2024, 2, 29),
    date.min,
    time(23, 59, 59, 999999),
    time(6, 30, tzinfo=UTC_MINUS_5),
    time(0, 0, tzinfo=timezone.utc),
    timedelta(days=-3, seconds=7, microseconds=11),
    timedelta.max,
    timedelta.min,
)


def make_job(*args: Any, **kwargs: Any) -> Job:
    return Job(id=new_id(), task="typed_tasks:record", args=args, kwargs=kwargs, queue="default")


class LocalOnly(enum.Enum):
    """Registered in this (the producer's) process only, never in a worker."""

    ONE = 1


register_type(LocalOnly)


@dataclass
class Unregistered:
    value: int


# -- encode and decode, in this process --------------------------------------------------


@pytest.mark.parametrize("value", BUILT_IN, ids=repr)
def test_each_built_in_type_round_trips_exactly(value: object) -> None:
    job = make_job(value, [value], key={"nested": value})
    back = decode(encode(job))
    assert repr(back.args) == repr((value, [value]))
    assert repr(back.kwargs) == repr({"key": {"nested": value}})
    assert type(back.args[0]) is type(value)


def test_built_in_values_may_be_dict_keys() -> None:
    keys = {UUID(int=7): 1, date(2030, 1, 1): 2, Decimal("1.5"): 3, timedelta(1): 4}
    assert decode(encode(make_job(keys))).args == (keys,)


OFFSETS = st.integers(-23 * 60, 23 * 60).map(lambda m: timezone(timedelta(minutes=m)))
"""Fixed UTC offsets in whole minutes: the only tzinfo a time may carry (others, and
fold=1, are refused: see below)."""


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.decimals(allow_nan=True, allow_infinity=True)
        | st.uuids()
        | st.dates()
        | st.times(timezones=st.none() | OFFSETS).map(lambda t: t.replace(fold=0))
        | st.timedeltas(),
        max_size=6,
    )
)
def test_any_built_in_value_round_trips(values: list[Any]) -> None:
    # repr, not ==: a NaN never equals itself, and -0 equals 0
    assert repr(unpack(pack(values))) == repr(values)


def test_registered_dataclass_enum_and_class_round_trip() -> None:
    shape = typed.Shape("square", [typed.Point(0, Decimal("1.5"))], typed.Colour.BLUE)
    money = typed.Money(499, "EUR")
    back = decode(encode(make_job(shape, colour=typed.Colour.RED, price={money: money})))
    assert back.args == (shape,)
    assert back.kwargs == {"colour": typed.Colour.RED, "price": {money: money}}
    assert type(back.args[0].corners[0]) is typed.Point


def test_a_registered_dataclass_travels_as_a_map_of_its_init_fields_under_its_name() -> None:
    packed = msgpack.unpackb(pack(typed.Point(3, Decimal(1))))
    assert packed.code == REGISTERED
    name, fields = msgpack.unpackb(packed.data, raw=False)
    assert name == "typed_tasks:Point" and fields == {"x": 3, "y": msgpack.ExtType(1, b"1")}
    # An explicit name replaces module:qualname; a field with init=False is not sent.
    shape = msgpack.unpackb(pack(typed.Shape("s", [], typed.Colour.RED)))
    name, fields = msgpack.unpackb(shape.data, raw=False)
    assert name == "shapes:Shape" and set(fields) == {"name", "corners", "colour"}


def test_register_type_refuses_what_cannot_work() -> None:
    class Plain:
        pass

    class Small(enum.IntEnum):
        A = 1

    with pytest.raises(TypeError, match="encode= and decode="):
        register_type(Plain)
    with pytest.raises(TypeError, match="both encode and decode"):
        register_type(Plain, encode=lambda p: 1)
    with pytest.raises(TypeError, match="IntEnum"):
        register_type(Small)
    with pytest.raises(TypeError, match="encoded by rqueue already"):
        register_type(Decimal)


# -- refused at dispatch, naming the argument --------------------------------------------


@pytest.mark.parametrize(
    ("args", "kwargs", "path", "why"),
    [
        ((1, object()), {}, "args[1]", "register_type"),
        ((), {"a": [1, {"b": Unregistered(1)}]}, "kwargs['a'][1]['b']", "register_type"),
        ((datetime(2027, 1, 1),), {}, "args[0]", "naive"),
        ((time(1, tzinfo=ZoneInfo("Europe/Paris")),), {}, "args[0]", "fixed offset"),
        ((time(1, fold=1),), {}, "args[0]", "fold"),
        ((time(1, tzinfo=timezone(timedelta(seconds=30))),), {}, "args[0]", "whole minutes"),
        ((typed.Point(1, object()),), {}, "args[0]", "can not serialize 'object'"),  # type: ignore[arg-type]
        (({Decimal("NaN"): 1},), {}, "args[0] key Decimal('NaN')", "NaN"),
    ],
)
def test_unknown_types_are_still_refused_at_dispatch_with_the_path(
    queue: RedisQueue, args: tuple[Any, ...], kwargs: dict[str, Any], path: str, why: str
) -> None:
    with pytest.raises(UnserializableArgument) as raised:
        typed.record.dispatch(*args, **kwargs)
    message = str(raised.value)
    assert f"argument {path} of task typed_tasks:record" in message and why in message, message
    assert queue.client.keys("queues:*") == []


def test_registered_values_nesting_too_deep_are_refused_at_dispatch() -> None:
    @dataclass
    class Node:
        next: Node | None

    register_type(Node, name="test:Node")
    chain: Node | None = None
    for _ in range(MAX_DEPTH + 1):
        chain = Node(chain)
    with pytest.raises(UnserializableArgument, match="deeper than"):
        encode(make_job(chain))


# -- hostile bytes -------------------------------------------------------------------------


def _ext(code: int, data: bytes) -> bytes:
    """A payload whose one argument is the extension value ``code``/``data``."""
    return encode(make_job(msgpack.ExtType(code, data)))


def _nested_registered(depth: int) -> msgpack.ExtType:
    value = msgpack.ExtType(REGISTERED, msgpack.packb(["test:Node", {"next": None}]))
    for _ in range(depth):
        value = msgpack.ExtType(REGISTERED, msgpack.packb(["test:Node", {"next": value}]))
    return value


HOSTILE = {
    _ext(1, b"\xff\xfe"): "malformed Decimal",
    _ext(1, b"not a number"): "malformed Decimal",
    _ext(2, b"short"): "malformed UUID",
    _ext(3, b"2024-13-45"): "malformed date",
    _ext(4, b"\x00"): "malformed time",
    _ext(5, b"\x01\x02"): "malformed timedelta",
    _ext(5, b"\x7f\xff\xff\xff" * 3): "malformed timedelta",
    _ext(99, b"anything"): "unknown msgpack extension type 99",
    _ext(REGISTERED, b"\xc1"): "malformed registered value",
    _ext(REGISTERED, msgpack.packb(["os:system", "rm -rf /"])): "'os:system' is not registered",
    _ext(REGISTERED, msgpack.packb(["typed_tasks:Point", {"z": 1}])): "could not be decoded",
    _ext(REGISTERED, msgpack.packb(["typed_tasks:Colour", "green"])): "could not be decoded",
    encode(make_job(_nested_registered(2000))): f"deeper than {MAX_DEPTH}",
}


@pytest.mark.parametrize("data", list(HOSTILE), ids=list(HOSTILE.values()))
def test_hostile_extension_bytes_raise_invalid_payload(data: bytes) -> None:
    with pytest.raises(InvalidPayload, match=HOSTILE[data]):
        decode(data)


def test_a_garbage_value_in_a_kept_result_is_a_clear_error(queue: RedisQueue) -> None:
    handle = typed.total.dispatch([])
    key = queue.keys("default").result(handle.id)
    record = {"state": "succeeded", "result": msgpack.ExtType(REGISTERED, b"\xc1")}
    queue.client.set(key, msgpack.packb(record))
    with pytest.raises(InvalidPayload, match=f"result record of task {handle.id}: malformed"):
        handle.status()


# -- through a real worker -----------------------------------------------------------------


def test_built_in_and_registered_types_reach_a_real_worker_as_given(
    queue: RedisQueue, workers: Workers
) -> None:
    shape = typed.Shape("square", [typed.Point(0, Decimal("0.1"))], typed.Colour.RED)
    sent = [
        (BUILT_IN, {}),
        ((shape,), {"price": typed.Money(1999, "EUR"), "colour": typed.Colour.BLUE}),
    ]
    for args, kwargs in sent:
        typed.record.dispatch(*args, **kwargs)
    # No -A: the worker imports typed_tasks, which registers the types, on first use.
    code, output = workers.run("--stop-when-empty")
    assert code == 0, output
    assert strings(queue.client, typed.SEEN) == [repr((a, k)) for a, k in sent]
    assert queue.sizes(["default"])[0].failed == 0


def test_a_kept_decimal_and_a_registered_result_round_trip_through_handle_result(
    queue: RedisQueue, workers: Workers
) -> None:
    summed = typed.total.dispatch([Decimal("0.10"), Decimal("0.20")])
    moved = typed.moved.dispatch(typed.Point(1, Decimal("2.5")), by=Decimal("0.5"))
    workers.start()
    result = summed.result(timeout=20)
    assert type(result) is Decimal and str(result) == "0.30"
    assert moved.result(timeout=20) == typed.Point(1, Decimal("3.0"))


def test_hostile_payloads_fail_alone_as_invalid_payload_and_the_next_task_runs(
    queue: RedisQueue, workers: Workers
) -> None:
    typed.record.dispatch("before")
    hostile = list(HOSTILE)
    for data in hostile:
        queue.client.rpush("queues:default", data)
    # Registered here, in the producer, but never in the worker.
    unknown_there = typed.record.dispatch(LocalOnly.ONE).id
    typed.record.dispatch("after")
    code, output = workers.run("-A", "typed_tasks", "--stop-when-empty")
    assert code == 0, output
    assert strings(queue.client, typed.SEEN) == [repr((("before",), {})), repr((("after",), {}))]
    failed = {with_attempts(f.payload, 0): f for f in FailedTasks(queue).list(["default"])}
    assert len(failed) == len(hostile) + 1
    for data in hostile:
        assert failed[data].exception in ("InvalidPayload", "UnregisteredType"), failed[data]
        assert HOSTILE[data] in failed[data].message, failed[data].message
    [local] = [f for f in failed.values() if f.id == unknown_there]
    assert local.exception == "UnregisteredType"
    assert "type 'test_argument_types:LocalOnly' is not registered in this process" in local.message
    assert "register_type where your tasks are defined" in local.message
    assert "Traceback" not in output


def test_a_schedule_refuses_the_new_types_clearly(queue: RedisQueue) -> None:
    """Definitions are read by processes that may not have registered a type (the CLI):
    they hold msgpack's own types only, and say so."""
    from datetime import timedelta as every

    import apptasks

    from rqueue.errors import InvalidSchedule
    from rqueue.schedules.api import Schedules

    with pytest.raises(InvalidSchedule, match="not supported in schedules"):
        Schedules(queue).add(
            "priced", apptasks.scheduled, every=every(minutes=5), args=(Decimal("1.5"),)
        )
    assert Schedules(queue).list() == []
