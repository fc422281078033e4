import signal, subprocess, time
import pytest
from support import wait_for
@pytest.mark.parametrize("n", range(10))
def test_race(queue, workers, n):
    worker = workers.start("-c", "4", "--block-for", "0.5")
    wait_for(lambda: len(worker.children()) >= 1, 10, "kids", ) if False else None
    deadline = time.monotonic() + 10
    while len(worker.children()) < 1 and time.monotonic() < deadline:
        pass
    worker.signal(signal.SIGTERM)
    try:
        assert worker.wait(6) == 0
    except subprocess.TimeoutExpired:
        print([ (c.pid, c.status()) for c in worker.children()])
        raise
