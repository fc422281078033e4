"""Put on PYTHONPATH to run a process whose clock is RQUEUE_TEST_CLOCK_SKEW seconds off.

time.time, time.time_ns and datetime.now/utcnow/today all report the skewed time, as
they would on a machine with a wrong clock; monotonic clocks are untouched (they
measure intervals, not dates). Used by tests/unit/schedules/test_schedules_workers.py only.
"""

import datetime as _datetime
import os
import time

_skew = float(os.environ.get("RQUEUE_TEST_CLOCK_SKEW", "0"))
if _skew:
    _real_time, _real_time_ns = time.time, time.time_ns
    time.time = lambda: _real_time() + _skew
    time.time_ns = lambda: _real_time_ns() + int(_skew * 1e9)

    class _SkewedDatetime(_datetime.datetime):
        @classmethod
        def now(cls, tz=None):  # type: ignore[no-untyped-def]
            return super().now(tz) + _datetime.timedelta(seconds=_skew)

        @classmethod
        def utcnow(cls):  # type: ignore[no-untyped-def]
            return super().utcnow() + _datetime.timedelta(seconds=_skew)

        @classmethod
        def today(cls):  # type: ignore[no-untyped-def]
            return super().today() + _datetime.timedelta(seconds=_skew)

    _datetime.datetime = _SkewedDatetime  # type: ignore[misc]
