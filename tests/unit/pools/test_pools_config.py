"""The pools file: every kind of error is a usage error naming the key; --check's plan."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import click
import pytest
from support import cli

from rqueue.cli.work import work
from rqueue.settings.config import Config, ConfigError
from rqueue.worker.pools.config import WORK_KEYS, load
from rqueue.worker.pools.plan import parents

GOOD = """
[tool.rqueue.pools.mail]
queues = ["emails", "notifications"]
max_processes = 8
timeout = 60

[tool.rqueue.environments.production.pools.mail]
max_processes = 32
"""


def _write(tmp_path: Path, text: str, name: str = "pyproject.toml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


@pytest.mark.parametrize(
    ("pool", "named"),
    [
        ('queues = ["a"]\ntimeuot = 5', "tool.rqueue.pools.p.timeuot: unknown key"),
        ('queues = ["a"]\ntimeout = -1', "tool.rqueue.pools.p.timeout must be a number from"),
        ('queues = ["a"]\ntries = 1.5', "tool.rqueue.pools.p.tries must be a whole number"),
        ('queues = ["a"]\nthreads = true', "tool.rqueue.pools.p.threads must be a whole number"),
        ('queues = ["a b"]', "tool.rqueue.pools.p.queues: invalid queue name 'a b'"),
        ('queues = ["a", "a"]', "tool.rqueue.pools.p.queues names a queue twice"),
        ("queues = []", "tool.rqueue.pools.p.queues must be a list of queue names"),
        ("max_processes = 2", "tool.rqueue.pools.p.queues: missing"),
        (
            'queues = ["a"]\nmin_processes = 4\nmax_processes = 2',
            "tool.rqueue.pools.p.min_processes (4) is above max_processes (2)",
        ),
        ('queues = ["a"]\nmax_processes = 0', "tool.rqueue.pools.p.max_processes must be a whole"),
        ('queues = ["a"]\nbalance = "fast"', "tool.rqueue.pools.p.balance must be one of auto"),
        (
            'queues = ["a", "b"]\nmax_processes = 1',
            "tool.rqueue.pools.p.max_processes (1) is below",
        ),
        ('queues = ["a"]\nrate = "b=5/s"', "tool.rqueue.pools.p.rate: 'b' is not one of"),
        ('queues = ["a"]\nrate = "lots"', "tool.rqueue.pools.p.rate: a rate is TASKS/PERIOD"),
        ('queues = ["a"]\nschedule = "yes"', "tool.rqueue.pools.p.schedule must be true or false"),
        ('queues = ["a"]\nlog_level = "LOUD"', "tool.rqueue.pools.p.log_level must be one of"),
        ('queues = ["a"]\napp = "apptasks"', "tool.rqueue.pools.p.app must be a list of module"),
        ('queues = ["a"]\nevents_length = 5', "tool.rqueue.pools.p.events_length: the length"),
        ('queues = ["a"]\nbalance_cooldown = inf', "tool.rqueue.pools.p.balance_cooldown must be"),
    ],
)
def test_an_error_in_a_pool_is_a_usage_error_naming_its_key(
    config: Config, tmp_path: Path, pool: str, named: str
) -> None:
    path = _write(tmp_path, f"[tool.rqueue.pools.p]\n{pool}\n")
    result = cli(config, "supervise", "--check", "--config", str(path))
    assert result.returncode == 2, result.stderr
    assert f"{path}: {named}" in result.stderr, result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize(
    ("text", "env", "named"),
    [
        (GOOD + "[tool.rqueue.environments.production.pools.mail]\n", None, "not valid TOML"),
        (GOOD + "[tool.rqueue.extra]\n", None, "tool.rqueue: unknown key 'extra'"),
        ("[tool.other]\n", None, "no [tool.rqueue] table"),
        ("tool = 1\n", None, "no [tool.rqueue] table"),
        ("[tool.rqueue]\n", None, "tool.rqueue.pools: no pool declared"),
        (GOOD, "staging", "tool.rqueue.environments: no environment 'staging'"),
        (
            GOOD + "[tool.rqueue.environments.production.pools.sms]\n",
            "production",
            "tool.rqueue.environments.production.pools.sms: no pool 'sms'",
        ),
        (
            GOOD.replace("max_processes = 32", "max_processes = 2000"),
            "production",
            "tool.rqueue.environments.production.pools.mail.max_processes must be",
        ),
    ],
)
def test_an_error_in_the_file_or_an_environment_names_where_it_is(
    config: Config, tmp_path: Path, text: str, env: str | None, named: str
) -> None:
    path = _write(tmp_path, text)
    args = ("--env", env) if env else ()
    result = cli(config, "supervise", "--check", "--config", str(path), *args)
    assert result.returncode == 2, result.stderr
    assert named in result.stderr, result.stderr


def test_check_prints_each_pool_s_parents_and_their_command_lines(
    config: Config, tmp_path: Path
) -> None:
    _write(tmp_path, GOOD.replace("[tool.rqueue.", "[").replace("\n[", "\n["), "rqueue.toml")
    result = cli(config, "supervise", "--check", "--env", "production", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == "rqueue.toml (environment production): 1 pools"
    assert lines[1].startswith("pool mail: queues emails, notifications; 2 to 32 processes;")
    assert lines[2:] == [
        "  1 to 31 processes: rqueue work emails --timeout 60",
        "  1 to 31 processes: rqueue work notifications --timeout 60",
    ]


def test_an_environment_overrides_a_pool_s_keys(tmp_path: Path) -> None:
    path = _write(tmp_path, GOOD)
    assert load(path).pools[0].max_processes == 8
    (mail,) = load(path, "production").pools
    assert (mail.max_processes, mail.work) == (32, {"timeout": 60})


def test_the_balance_decides_the_parents_and_their_ranges(tmp_path: Path) -> None:
    base = '[pools.p]\nqueues = ["a", "b", "c"]\nmin_processes = 3\nmax_processes = 8\n'
    ranges = {}
    for balance in ("auto", "simple", "off"):
        path = _write(tmp_path, f'{base}balance = "{balance}"\n', "rqueue.toml")
        (pool,) = load(path).pools
        ranges[balance] = [(p.queues, p.least, p.most) for p in parents(pool)]
    assert ranges["auto"] == [(("a",), 1, 6), (("b",), 1, 6), (("c",), 1, 6)]
    assert ranges["simple"] == [(("a",), 1, 3), (("b",), 1, 3), (("c",), 1, 3)]
    assert ranges["off"] == [(("a", "b", "c"), 3, 8)]


def test_every_rqueue_work_option_is_a_pool_key_or_left_out_on_purpose() -> None:
    """A new ``rqueue work`` option must be taken by the file too (or listed here)."""
    left_out = {
        "queues", "concurrency", "max_concurrency", "concurrency_file", "once",
        "stop_when_empty", "stop_when_drained", "redis_url", "redis_url_file", "prefix",
        "pin_cpus",  # a pool's parents would pin their children to the same CPUs
    }  # fmt: skip
    for param in work.params:
        if isinstance(param, click.Option):
            name = max(param.opts, key=len).lstrip("-").replace("-", "_")
        else:
            name = str(param.name)
        assert name in left_out or name in WORK_KEYS, f"{name} is no pool key"


def test_a_missing_file_is_an_error_naming_it(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read"):
        load(tmp_path / "nowhere.toml")


def test_the_deployment_guide_s_pools_file_passes_the_check(config: Config, tmp_path: Path) -> None:
    guide = (Path(__file__).parents[3] / "docs" / "deployment.md").read_text()
    example = guide.split("```toml\n")[1].split("```")[0]
    _write(tmp_path, example, "rqueue.toml")
    (tmp_path / "myapp").mkdir()  # the app its pool names: --check imports it
    (tmp_path / "myapp" / "__init__.py").write_text("")
    (tmp_path / "myapp" / "tasks.py").write_text("")
    for args in ((), ("--env", "production")):
        result = cli(config, "supervise", "--check", *args, cwd=tmp_path)
        assert result.returncode == 0, result.stderr
    assert "pool mail: queues emails, notifications; 2 to 32 processes" in result.stdout
    _write(tmp_path, example.replace("timeout = 60", "timeout = -1"), "rqueue.toml")
    result = cli(config, "supervise", "--check", cwd=tmp_path)
    shown = result.stderr.splitlines()[-1]
    assert f"\n{shown}\n" in guide  # the error the guide shows is the one printed


def test_check_by_the_rqueue_command_imports_the_app_from_the_folder(
    config: Config, tmp_path: Path
) -> None:
    """``python -m rqueue`` (the other tests' way) puts the folder on the import path
    itself; the installed ``rqueue`` command does not."""
    _write(tmp_path, '[pools.main]\nqueues = ["default"]\napp = ["pool_app"]\n', "rqueue.toml")
    (tmp_path / "pool_app.py").write_text("")
    result = subprocess.run(
        [str(Path(sys.executable).parent / "rqueue"), "supervise", "--check"],
        capture_output=True,
        text=True,
        timeout=30,
        cwd=tmp_path,
        env={**os.environ, "REDIS_URL": config.redis_url},
    )
    assert result.returncode == 0, result.stderr


def test_check_warns_of_a_queue_nothing_names(config: Config, tmp_path: Path) -> None:
    (tmp_path / "pool_app.py").write_text(
        "from rqueue import task\n\n@task(queue='emails')\ndef send(to): ...\n"
    )
    _write(
        tmp_path,
        '[pools.mail]\nqueues = ["emails", "emial"]\nbalance = "off"\napp = ["pool_app"]\n',
        "rqueue.toml",
    )
    result = cli(config, "supervise", "--check", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    warned = [line for line in result.stderr.splitlines() if line.startswith("warning:")]
    assert len(warned) == 1, result.stderr  # emails is a task's: only the typo
    assert "pools.mail.queues: unknown queue 'emial'" in warned[0]


def test_check_refuses_an_app_module_that_does_not_import(config: Config, tmp_path: Path) -> None:
    _write(tmp_path, '[pools.mail]\nqueues = ["emails"]\napp = ["no_such_app"]\n', "rqueue.toml")
    result = cli(config, "supervise", "--check", cwd=tmp_path)
    assert result.returncode == 2
    assert "no module named 'no_such_app'" in result.stderr
