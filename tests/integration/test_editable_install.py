"""The README's install (``pip install -e .``) type-checks the user's code.

setuptools makes an editable install either a ``.pth`` path entry or an import hook;
mypy follows only the first, and said "Cannot find implementation or library stub for
module named 'rqueue'" in every user's module after the README's install (issue #26,
item 14). So this installs the checkout as the README says, into a fresh virtualenv,
and runs ``mypy --strict`` on a small typed module of a user's, from another folder.
Slow (a venv, a build, a mypy run: about half a minute), so it runs once, here.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import textwrap
import venv
from pathlib import Path

import pytest

CHECKOUT = Path(__file__).resolve().parents[2]
USER_MODULE = """
from rqueue import task


@task(queue="emails")
def send_welcome(user_id: int, greeting: str = "Hello") -> str:
    return f"{greeting}, {user_id}"


def signed_up(user_id: int) -> None:
    send_welcome.dispatch(user_id)
    send_welcome.later(60, user_id, greeting="Hi")
    send_welcome.dispatch(str(user_id))  # the one error expected
"""


@pytest.mark.timeout(300)
def test_mypy_sees_rqueue_after_the_readme_s_editable_install(tmp_path: Path) -> None:
    pytest.importorskip("mypy")
    # The checkout's packaging (pyproject.toml, the package) copied, so the build's
    # egg-info lands there and not in the working tree.
    checkout = tmp_path / "checkout"
    checkout.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(CHECKOUT / name, checkout / name)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    shutil.copytree(CHECKOUT / "rqueue", checkout / "rqueue", ignore=ignore)
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=True)
    python = env_dir / "bin" / "python"
    install = subprocess.run(
        [python, "-m", "pip", "install", "--quiet", "--no-deps", "-e", checkout],
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert install.returncode == 0, install.stdout + install.stderr
    user = tmp_path / "user"  # not the checkout: mypy must find rqueue as installed
    user.mkdir()
    (user / "signup.py").write_text(textwrap.dedent(USER_MODULE))
    mypy = [sys.executable, "-m", "mypy", "--strict", "--no-incremental"]
    checked = subprocess.run(
        [*mypy, "--python-executable", str(python), "signup.py"],
        capture_output=True,
        text=True,
        cwd=user,
        timeout=240,
    )
    errors = [line for line in checked.stdout.splitlines() if ": error:" in line]
    assert "Cannot find implementation or library stub" not in checked.stdout, checked.stdout
    # rqueue's types reached the user's code: the one wrong argument, and only it.
    assert len(errors) == 1, checked.stdout + checked.stderr
    assert 'Argument 1 to "dispatch" of "Task" has incompatible type "str"' in errors[0], errors
