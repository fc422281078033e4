"""Wait limits per queue (``--wait [QUEUE=]SECONDS``): parsed, checked, and applied."""

from __future__ import annotations

import pytest

from rqueue.metrics.wait_limits import WaitLimits


def test_a_queue_s_own_limit_comes_before_the_default() -> None:
    limits = WaitLimits.parse(["emails=300", "60", "mail:high=0.5"])
    assert limits.limit("emails") == 300 and limits.limit("mail:high") == 0.5
    assert limits.limit("anything") == 60
    assert limits.over("anything", 61) and not limits.over("emails", 61)
    assert not limits.over("anything", None)  # nothing ready waits
    assert WaitLimits.parse([], 30).limit("x") == 30  # --max-wait, as the default


def test_without_limits_nothing_is_over() -> None:
    assert not WaitLimits().over("default", 1e9)


@pytest.mark.parametrize(
    ("specs", "default", "why"),
    [
        (["emails=soon"], None, "use QUEUE=SECONDS or SECONDS"),
        (["emails=-1"], None, "finite number from 0"),
        (["emails=nan"], None, "finite number from 0"),
        (["emails=inf"], None, "finite number from 0"),
        (["=5"], None, "invalid queue name"),
        (["x:delayed=5"], None, "reserved for the keys"),
        (["emails=5", "emails=6"], None, "given twice"),
        (["5", "6"], None, "given already"),
        (["5"], 6.0, "given already"),
    ],
)
def test_anything_else_is_refused_saying_which_text_and_why(
    specs: list[str], default: float | None, why: str
) -> None:
    with pytest.raises(ValueError, match=why) as refused:
        WaitLimits.parse(specs, default)
    assert repr(specs[-1]) in str(refused.value)
