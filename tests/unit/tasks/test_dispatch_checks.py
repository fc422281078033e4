"""Mistakes caught where they are made, not by the worker after every try: a call
that does not fit the task's signature, a task no worker could find by name, the
wrong thing given to dispatch_many, a result() that could never come (issue #26,
items 10, 12, 20 and 23)."""

from __future__ import annotations

import asyncio
import functools
import inspect
import random
import time
from collections.abc import Callable
from typing import Any

import checked_tasks as c
import pytest
from support import ready

from rqueue import batch, chain, dispatch_many, result_of, task
from rqueue.errors import InvalidTaskOption, ResultNotKept
from rqueue.store.queue import RedisQueue
from rqueue.tasks.arguments import CallShape
from rqueue.testing import fake

HELLO = "task checked_tasks:hello cannot be called with these arguments"


@pytest.mark.parametrize(
    "dispatch",
    [
        lambda: c.hello.dispatch("a", extra=1),
        lambda: c.hello.dispatch(),
        lambda: c.hello.dispatch("a", "b"),
        lambda: c.hello.later(60, "a", extra=1),
        lambda: c.hello.using(queue="other").dispatch(name="a", extra=1),
        lambda: c.hello.pending(extra=1),
        lambda: c.hello.pending("a", "b", "c"),
        lambda: c.hello.pending().dispatch(),
        lambda: c.hello.dispatch_many([("a",), ("a", "b")]),
        lambda: dispatch_many([c.hello.pending("a"), c.hello.pending()]),
        lambda: asyncio.run(c.hello.dispatch_async("a", extra=1)),
        lambda: asyncio.run(c.hello.later_async(60)),
    ],
    ids=[
        "extra keyword",
        "missing",
        "too many",
        "later",
        "using",
        "pending keyword",
        "pending too many",
        "pending dispatched",
        "task dispatch_many",
        "dispatch_many",
        "dispatch_async",
        "later_async",
    ],
)
def test_a_call_that_does_not_fit_the_signature_is_refused_at_dispatch(
    queue: RedisQueue, dispatch: Callable[[], object]
) -> None:
    with pytest.raises(TypeError, match=HELLO):
        dispatch()
    assert ready(queue) == [] and ready(queue, "other") == []
    assert queue.client.zcard(queue.keys("default").delayed) == 0


def test_async_tasks_are_checked_as_well(queue: RedisQueue) -> None:
    with pytest.raises(TypeError, match="task checked_tasks:hello_async cannot be called"):
        c.hello_async.dispatch("a", extra=1)
    assert c.hello_async.dispatch(name="a").task == "checked_tasks:hello_async"
    assert len(ready(queue)) == 1


def test_pending_may_lack_the_argument_a_chain_step_or_callback_is_given_first(
    queue: RedisQueue,
) -> None:
    chain(c.hello.pending("a"), c.hello.pending(), pipe=True)  # the step gets "hello a"
    batch([c.hello.pending("a")]).then(c.notify.pending("ops"))  # notify gets the batch
    with pytest.raises(TypeError, match=HELLO):  # dispatched as it is: checked in full
        batch([c.hello.pending()]).dispatch()
    assert ready(queue) == []


def test_a_call_given_one_argument_first_is_checked_with_it() -> None:
    """For workflows: a callback gets the batch or the failure first."""
    c.notify.check_call(("ops",), {}, given=1)
    with pytest.raises(TypeError, match="task checked_tasks:notify cannot be called"):
        c.notify.check_call(("ops",), {})
    with pytest.raises(TypeError, match="task checked_tasks:notify cannot be called"):
        c.notify.check_call(("ops", "extra"), {}, given=1)


def test_a_wrapping_decorator_is_called_as_it_is_not_as_what_it_wraps(
    queue: RedisQueue,
) -> None:
    """``functools.wraps`` copies the wrapped signature's look, not the wrapper's: the
    wrapper is what the worker calls."""
    assert c.store(1) == "connection: 1"
    c.store.dispatch(1)
    c.anything.dispatch(1, 2, three=3)
    assert len(ready(queue)) == 2


def test_a_fake_refuses_the_call_a_worker_would_refuse() -> None:
    with fake() as recorded:
        with pytest.raises(TypeError, match=HELLO):
            c.hello.dispatch("a", extra=1)
        recorded.assert_nothing_dispatched()


def _nested() -> None:
    @task
    def inner() -> None:
        pass


@pytest.mark.parametrize(
    ("define", "why"),
    [
        (lambda: task(lambda: None), "<lambda> is a lambda"),
        (lambda: task(queue="emails")(lambda: None), "<lambda> is a lambda"),
        (_nested, r"_nested.<locals>.inner is defined inside _nested\(\)"),
        (lambda: task(functools.partial(c.not_a_task, 1)), "has no module and qualified name"),
    ],
    ids=["lambda", "lambda with options", "nested", "builtin"],
)
def test_what_no_worker_could_find_by_name_is_refused_at_decoration(
    define: Callable[[], object], why: str
) -> None:
    with pytest.raises(InvalidTaskOption, match=why) as raised:
        define()
    assert "must be a function defined with def at module level" in str(raised.value)


def test_a_factory_may_name_the_tasks_it_makes() -> None:
    made = task(name="checked_tasks:made")(lambda: 1)
    assert made.name == "checked_tasks:made"


@pytest.mark.parametrize(
    ("given", "said"),
    [
        (c.not_a_task, "got not_a_task, which is not a task: decorate it with @task"),
        (c.hello, "got the task checked_tasks:hello itself: pass hello.pending"),
        (("a",), "got tuple"),
    ],
)
def test_dispatch_many_says_what_it_expected(queue: RedisQueue, given: Any, said: str) -> None:
    with pytest.raises(TypeError, match="dispatch_many takes pending\\(\\) calls") as raised:
        dispatch_many([c.hello.pending("a"), given])
    assert said in str(raised.value)
    assert ready(queue) == []


def test_dispatch_many_of_one_call_not_in_a_list_says_so(queue: RedisQueue) -> None:
    for alone in (c.hello.pending("a"), c.hello):
        with pytest.raises(TypeError, match="got one alone") as raised:
            dispatch_many(alone)  # type: ignore[arg-type]
        assert "put it in a list" in str(raised.value)
    assert ready(queue) == []


def test_a_tasks_dispatch_many_takes_argument_tuples_or_pending_calls(queue: RedisQueue) -> None:
    with pytest.raises(TypeError, match=r"takes a tuple of arguments or a pending\(\) call"):
        c.hello.dispatch_many(["abc"])  # a string is not its arguments: ('a', 'b', 'c')
    assert ready(queue) == []


def test_result_of_a_task_that_keeps_none_says_so_at_once(queue: RedisQueue) -> None:
    handles = [c.hello.dispatch("a"), *c.hello.dispatch_many([("b",)])]
    for handle in handles:
        started = time.monotonic()
        with pytest.raises(ResultNotKept, match="keeps no result, so result\\(\\) would wait"):
            handle.result(timeout=3)
        assert time.monotonic() - started < 1
        with pytest.raises(TimeoutError):  # what callers caught before
            handle.result(timeout=3)


def test_a_handle_known_by_id_alone_waits_then_says_why_there_may_be_no_result(
    queue: RedisQueue,
) -> None:
    handle = result_of(c.hello.dispatch("a").id)
    with pytest.raises(TimeoutError, match=r"no result after 0\.2 s on queue 'default'") as raised:
        handle.result(timeout=0.2)
    assert "keeps none (keep_result)" in str(raised.value)
    assert not isinstance(raised.value, ResultNotKept)
    kept = c.kept.dispatch(1)
    with pytest.raises(TimeoutError, match="has not finished"):  # it keeps one: waited for
        kept.result(timeout=0.1)


def test_the_check_agrees_with_python_on_every_kind_of_parameter() -> None:
    """Signatures of every shape (positional-only, defaults, ``*args``, keyword-only,
    ``**kwargs``) and calls of every shape: refused at dispatch exactly when calling
    the function would raise TypeError."""
    kinds = [
        inspect.Parameter.POSITIONAL_ONLY,
        inspect.Parameter.POSITIONAL_OR_KEYWORD,
        inspect.Parameter.VAR_POSITIONAL,
        inspect.Parameter.KEYWORD_ONLY,
        inspect.Parameter.VAR_KEYWORD,
    ]
    chosen = random.Random(26)
    checked = 0
    while checked < 3000:
        parameters, names, defaulted = [], iter("abcdef"), False
        for kind in kinds:
            for _ in range(chosen.randint(0, 1 if kind in (kinds[2], kinds[4]) else 2)):
                name = {kinds[2]: "args", kinds[4]: "kw"}.get(kind) or next(names)
                default: object = inspect.Parameter.empty
                if kind in kinds[:2] and (defaulted or chosen.random() < 0.4):
                    default, defaulted = 0, True
                elif kind == kinds[3] and chosen.random() < 0.5:
                    default = 0
                parameters.append(inspect.Parameter(name, kind, default=default))
        namespace: dict[str, Any] = {}
        exec(f"def f{inspect.Signature(parameters)}: pass", namespace)
        function = namespace["f"]
        args = (1,) * chosen.randint(0, 4)
        kwargs = dict.fromkeys(chosen.sample("abcdefz", chosen.randint(0, 3)), 1)
        try:
            function(*args, **kwargs)
            python_calls = True
        except TypeError:
            python_calls = False
        shape = CallShape.of(function)
        assert shape is not None
        try:
            shape.check("t", args, kwargs)
            checked_calls = True
        except TypeError:
            checked_calls = False
        assert checked_calls == python_calls, (inspect.signature(function), args, kwargs)
        checked += 1


def test_chains_batches_and_callbacks_are_checked_when_they_are_built() -> None:
    import apptasks

    from rqueue import batch, chain

    record, with_hooks = apptasks.record, apptasks.with_hooks  # (value), (value, fail=False)
    with pytest.raises(TypeError, match="apptasks:record"):
        chain(record.pending(1, 2))  # the first step runs as it is
    with pytest.raises(TypeError, match="apptasks:record"):
        chain(record.pending(1), record.pending())  # no pipe: nothing is given first
    chain(record.pending(1), record.pending(), pipe=True)  # piped: the result comes first
    with pytest.raises(TypeError, match="apptasks:record"):
        batch([record.pending()])
    with pytest.raises(TypeError, match="apptasks:record"):
        batch([record.pending(1)]).then(record, "one too many")  # the batch comes first
    with pytest.raises(TypeError, match="apptasks:with_hooks"):
        chain(record.pending(1)).catch(with_hooks.pending("x", "y"))
    batch([record.pending(1)]).then(with_hooks, fail=True).finally_(record)
