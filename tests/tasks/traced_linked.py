"""Preloaded by a worker (``-A traced_linked``) in tests/unit/contrib/test_opentelemetry.py:
instruments its parent with ``link=True`` before it forks, so each child's attempts
start traces of their own, linked to their sends."""

import traced_tasks  # noqa: F401  (the SDK, and the tasks)

from rqueue.contrib.opentelemetry import instrument

instrument(link=True)
