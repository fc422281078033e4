"""The Django recipe (examples/django_app, docs/integrations.md), run for real.

A real uvicorn serves the example site and a real ``rqueue work -A
rqueue.contrib.django`` runs its tasks, on SQLite files under the test's tmp_path;
the dispatch-after-commit checks run in this process, against the same example
project, in its own database file.
"""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from recipes import EXAMPLES, assert_quotes_its_examples, serving
from support import Workers, follow_log, logged, ready, wait_for

from rqueue import chain
from rqueue.encoding.payload import decode
from rqueue.settings.config import Config
from rqueue.store.queue import RedisQueue

PROJECT = EXAMPLES / "django_app"
UVICORN = [sys.executable, "-m", "uvicorn", "mysite.asgi:application", "--port", "0"]
PASSWORD = "a long test password 42"
PROMOTE_BOB = (
    "from django.contrib.auth.models import User\n"
    "User.objects.filter(username='bob').update(is_staff=True)\n"
)


def manage(env: dict[str, str], *args: str) -> str:
    run = subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=PROJECT,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    return run.stdout


@pytest.fixture
def site(config: Config, queue: RedisQueue, tmp_path: Path) -> dict[str, str]:
    """The environment of the example project, its database migrated."""
    env = {
        "DJANGO_SETTINGS_MODULE": "mysite.settings",
        "DJANGO_DATABASE_PATH": str(tmp_path / "db.sqlite3"),
        "REDIS_URL": config.redis_url,
    }
    manage(env, "migrate", "--verbosity", "0")
    return env


def test_an_order_is_confirmed_by_a_worker_after_its_commit(site: dict[str, str]) -> None:
    workers = Workers(Config.resolve(redis_url=site["REDIS_URL"]), cwd=PROJECT)
    try:
        worker = workers.start("-A", "rqueue.contrib.django", "default", env=site)
        log = follow_log(worker)
        with serving(UVICORN, PROJECT, site) as base, httpx.Client(base_url=base) as client:
            created = client.post("/orders/", data={"item": "book"})
            assert created.status_code == 201, created.text
            order = created.json()
            assert order["status"] == "new"

            def confirmed() -> bool:
                return client.get(f"/orders/{order['id']}/").json()["status"] == "confirmed"

            wait_for(confirmed, timeout=30, message="the worker to confirm the order")
        assert logged(log, "shop.tasks:confirm_order"), "".join(log)
        # Django sets TZ to its TIME_ZONE (America/Chicago by default): the worker's log
        # still shows UTC with its Z, the one rule for times (docs/worker.md, "Times").
        stamp = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z ")
        task_lines = [line for line in list(log) if "shop.tasks:confirm_order" in line]
        assert task_lines and all(stamp.match(line) for line in task_lines), task_lines
    finally:
        workers.kill_all()


@pytest.fixture
def staff_site(site: dict[str, str]) -> Iterator[tuple[str, str]]:
    """The site served, with a staff user "ann" and a logged-in plain user's session id."""
    script = (
        "from django.contrib.auth.models import User\n"
        "from django.test import Client\n"
        f"User.objects.create_user('ann', password={PASSWORD!r}, is_staff=True)\n"
        f"bob = User.objects.create_user('bob', password={PASSWORD!r})\n"
        "client = Client()\n"
        "client.force_login(bob)\n"
        "print(client.cookies['sessionid'].value)\n"
    )
    plain_session = manage(site, "shell", "--command", script).split()[-1]
    with serving(UVICORN, PROJECT, site) as base:
        yield base, plain_session


def test_the_dashboard_lets_a_staff_user_in(staff_site: tuple[str, str]) -> None:
    base, _ = staff_site
    with httpx.Client(base_url=base) as client:
        form = client.get("/admin/login/", params={"next": "/rqueue/"})
        token = client.cookies["csrftoken"]
        assert 'name="csrfmiddlewaretoken"' in form.text
        logged_in = client.post(
            "/admin/login/?next=/rqueue/",
            data={"username": "ann", "password": PASSWORD, "csrfmiddlewaretoken": token},
            headers={"referer": f"{base}/admin/login/"},
            follow_redirects=True,
        )
        assert logged_in.status_code == 200, logged_in.text
        assert str(logged_in.url) == f"{base}/rqueue/"
        assert "rqueue" in logged_in.text.lower()


def test_the_dashboard_sends_anyone_else_to_the_admin_login(staff_site: tuple[str, str]) -> None:
    base, plain_session = staff_site
    visitors = {
        "anonymous": {},
        "not staff": {"sessionid": plain_session},
        "forged": {"sessionid": "\x1b[31m<b>nope</b>'; DROP TABLE"},
    }
    for visitor, cookies in visitors.items():
        with httpx.Client(base_url=base, cookies=cookies) as client:
            response = client.get("/rqueue/failed", params={"q": "x y"})
        assert response.status_code == 302, visitor
        location = response.headers["location"]
        assert location == "/admin/login/?next=%2Frqueue%2Ffailed%3Fq%3Dx%2By", visitor


def test_the_same_session_gets_in_once_its_user_is_made_staff(
    site: dict[str, str], staff_site: tuple[str, str]
) -> None:
    base, plain_session = staff_site
    manage(site, "shell", "--command", PROMOTE_BOB)
    with httpx.Client(base_url=base, cookies={"sessionid": plain_session}) as client:
        assert client.get("/rqueue/").status_code == 200


# -- dispatch on commit, in this process ----------------------------------------------


@pytest.fixture(scope="module")
def django_project(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """The example project set up in this process, on a database file of its own.
    Django stays set up once this module's tests are done (it cannot be undone); the
    environment and sys.path are restored."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("DJANGO_SETTINGS_MODULE", "mysite.settings")
        patch.setenv("DJANGO_DATABASE_PATH", str(tmp_path_factory.mktemp("django") / "db.sqlite3"))
        patch.syspath_prepend(str(PROJECT))
        import django
        from django.core.management import call_command

        django.setup()
        call_command("migrate", verbosity=0)
        yield


def test_a_dispatch_in_a_transaction_waits_for_the_commit(
    django_project: None, queue: RedisQueue
) -> None:
    from django.db import transaction
    from shop.models import Order
    from shop.tasks import confirm_order

    from rqueue.contrib.django import dispatch_on_commit

    with transaction.atomic():
        order = Order.objects.create(item="lamp")
        dispatch_on_commit(confirm_order, order.id)
        assert ready(queue) == []  # a worker cannot see the call before the row
    (payload,) = ready(queue)
    job = decode(payload)
    assert (job.task, job.args) == ("shop.tasks:confirm_order", (order.id,))


def test_a_rollback_dispatches_nothing(django_project: None, queue: RedisQueue) -> None:
    from django.db import transaction
    from shop.models import Order
    from shop.tasks import confirm_order

    from rqueue.contrib.django import dispatch_on_commit

    with pytest.raises(RuntimeError), transaction.atomic():
        order = Order.objects.create(item="lamp")
        dispatch_on_commit(confirm_order, order.id)
        raise RuntimeError("the view failed")
    assert ready(queue) == []
    assert not Order.objects.filter(pk=order.id).exists()


def test_after_commit_takes_a_chain_and_outside_a_transaction_dispatches_at_once(
    django_project: None, queue: RedisQueue
) -> None:
    from django.db import transaction
    from shop.tasks import confirm_order

    from rqueue.contrib.django import after_commit

    after_commit(chain(confirm_order.pending(1), confirm_order.pending(2)))
    assert [decode(p).args for p in ready(queue)] == [(1,)]  # autocommit: at once
    with transaction.atomic():
        after_commit(confirm_order.pending(3))
        assert len(ready(queue)) == 1
    assert [decode(p).args for p in ready(queue)] == [(1,), (3,)]


def test_staff_only_closes_a_websocket_from_anyone_else_and_passes_lifespan_on(
    django_project: None,
) -> None:
    from rqueue.contrib.django import staff_only

    reached: list[str] = []
    sent: list[dict[str, object]] = []

    async def app(scope: dict[str, object], receive: object, send: object) -> None:
        reached.append(str(scope["type"]))

    async def receive() -> dict[str, object]:
        return {"type": "websocket.connect"}

    async def send(message: dict[str, object]) -> None:
        sent.append(message)

    guarded = staff_only(app)  # type: ignore[arg-type]
    socket = {"type": "websocket", "path": "/rqueue/", "headers": [(b"cookie", b"sessionid=x")]}
    asyncio.run(guarded(socket, receive, send))  # type: ignore[arg-type]
    asyncio.run(guarded({"type": "lifespan"}, receive, send))  # type: ignore[arg-type]
    assert sent == [{"type": "websocket.close", "code": 1008}]
    assert reached == ["lifespan"]


def test_the_docs_quote_the_django_example() -> None:
    assert_quotes_its_examples("Django")
