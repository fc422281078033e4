"""The three forms of a Redis URL, and the settings that depend on the topology.

Nothing here connects: each case reads a URL or a setting and checks what rqueue makes
of it, or that it is refused by name before any connection is tried.
"""

from __future__ import annotations

import math

import apptasks
import pytest
from support import cli

from rqueue.errors import InvalidTaskOption
from rqueue.settings.config import DISPATCH_RETRY, DISPATCH_RETRY_FAILOVER, Config, ConfigError
from rqueue.settings.redis_url import parse_redis_url, redact_url
from rqueue.store.cluster import ClusterClient
from rqueue.store.keys import GlobalKeys
from rqueue.store.queue import RedisQueue
from rqueue.text import redact


def test_a_plain_url_is_one_server() -> None:
    target = parse_redis_url("rediss://user:pw@host:6380/2?ssl_cert_reqs=none")
    assert (target.kind, target.hosts, target.tls) == ("single", (), True)
    assert target.node_url == "rediss://user:pw@host:6380/2?ssl_cert_reqs=none"


def test_a_cluster_url_names_its_seed_nodes() -> None:
    target = parse_redis_url("redis+cluster://:pw@10.0.0.1:7000,10.0.0.2,[::1]:7002/0")
    assert target.kind == "cluster"
    assert target.hosts == (("10.0.0.1", 7000), ("10.0.0.2", 6379), ("::1", 7002))
    assert target.node_url == "redis://:pw@10.0.0.1:7000/0"
    assert parse_redis_url("rediss+cluster://h:1/0").tls
    config = Config(redis_url="redis+cluster://h1:7000,h2:7000/0")
    assert config.cluster, "the URL alone turns cluster mode on, as RQUEUE_CLUSTER=1 does"
    assert isinstance(RedisQueue(config).client, ClusterClient)  # and connects nothing yet


def test_a_sentinel_url_keeps_the_data_and_sentinel_passwords_apart() -> None:
    url = (
        "rediss+sentinel://app:data%40pw@s1:26379,s2/mymaster/3"
        "?sentinel_username=watch&sentinel_password=sent%26pw&socket_keepalive=true"
    )
    target = parse_redis_url(url)
    assert (target.kind, target.service, target.tls) == ("sentinel", "mymaster", True)
    assert target.hosts == (("s1", 26379), ("s2", 26379))
    assert (target.sentinel_username, target.sentinel_password) == ("watch", "sent&pw")
    # The data nodes get the URL's own credentials and database, never the sentinels'.
    assert target.node_url == "rediss://app:data%40pw@s1:26379/3?socket_keepalive=true"
    shown = Config(redis_url=url).redacted_url()
    assert "data%40pw" not in shown and "sent%26pw" not in shown, shown
    assert shown.count("***") == 2, shown


def test_a_sentinel_url_sets_how_often_the_sentinels_are_asked_again() -> None:
    assert parse_redis_url("redis+sentinel://s/m/0").sentinel_check_interval == 1.0
    target = parse_redis_url("redis+sentinel://s/m/0?sentinel_check_interval=60&db=0")
    assert target.sentinel_check_interval == 60.0
    assert "sentinel_check_interval" not in target.node_url  # not redis-py's to read
    for value in ("0", "0.01", "nan", "90000", "x"):
        with pytest.raises(ConfigError, match=r"option sentinel_check_interval .* must be"):
            Config(redis_url=f"redis+sentinel://s/m/0?sentinel_check_interval={value}")


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("http://h/0", "unknown Redis URL scheme 'http://'"),
        ("redis+sentinel://s1:26379/", "names the master after the hosts"),
        ("redis+sentinel://s1:26379/mymaster/0/extra", "names the master after the hosts"),
        ("redis+cluster://h1:7000,:7001/0", "host 2 of 2 in the Redis URL is not host:port"),
        ("redis+cluster://h1:99999/0", "the host in the Redis URL is not host:port"),
        ("redis+sentinel://s1:x/m/0", "the host in the Redis URL is not host:port"),
        ("redis+sentinel://s1/m/x", "names the master after the hosts, then the database"),
        ("redis+cluster://h1/0?db=1", "a Redis Cluster has only database 0"),
        ("redis://h1/x", "the database after the host must be a whole number"),
        ("redis://h1,h2/0", "a redis:// URL names one server"),
    ],
)
def test_a_malformed_url_is_refused_with_what_was_expected(url: str, message: str) -> None:
    with pytest.raises(ConfigError, match=r"^invalid Redis URL: ") as caught:
        Config(redis_url=url)
    assert message in str(caught.value)


def test_the_command_line_names_where_a_bad_url_came_from(config: Config) -> None:
    result = cli(config, "size", "--redis-url", "redis+sentinel://:pw@s1:26379/")
    assert result.returncode == 2
    assert "invalid --redis-url: a Sentinel URL names the master" in result.stderr
    result = cli(config, "size", env={"REDIS_URL": "redis+cluster://h:0/0"})
    assert result.returncode == 2
    assert (
        "invalid REDIS_URL (from the environment): the host in the Redis URL is not host:port"
        in result.stderr
    )


def test_cluster_mode_cannot_name_a_sentinel_service(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RQUEUE_CLUSTER", "1")
    with pytest.raises(
        ConfigError, match="RQUEUE_CLUSTER is set but the Redis URL names a Sentinel"
    ):
        Config.resolve(redis_url="redis+sentinel://s1/mymaster/0")


def test_global_keys_share_one_tag_on_a_cluster_and_keep_their_names_elsewhere() -> None:
    assert GlobalKeys.for_prefix("app:", cluster=True) == GlobalKeys(
        "app:{rqueue}:queues",
        "app:{rqueue}:restart",
        "app:{rqueue}:schedules",
        "app:{rqueue}:batches",
        "app:{rqueue}:workers",
        "app:{rqueue}:pools",
    )
    assert GlobalKeys.for_prefix("app:") == GlobalKeys(
        "app:rqueue:queues",
        "app:rqueue:restart",
        "app:rqueue:schedules",
        "app:rqueue:batches",
        "app:rqueue:workers",
        "app:rqueue:pools",
    )


def test_dispatches_ride_out_a_failover_by_default_on_cluster_and_sentinel(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert Config(redis_url="redis://h/0").dispatch_retry_seconds == DISPATCH_RETRY
    for url in ("redis+cluster://h:7000/0", "redis+sentinel://s/m/0"):
        assert Config(redis_url=url).dispatch_retry_seconds == DISPATCH_RETRY_FAILOVER
    assert DISPATCH_RETRY_FAILOVER > 3 * 2.5, "the measured local failover takes ~2.5 s"
    monkeypatch.setenv("RQUEUE_DISPATCH_RETRY", "45")
    assert Config.resolve(redis_url="redis+sentinel://s/m/0").dispatch_retry_seconds == 45
    monkeypatch.setenv("RQUEUE_DISPATCH_RETRY", "nan")
    with pytest.raises(ConfigError, match=r"^RQUEUE_DISPATCH_RETRY must be a number"):
        Config.resolve()


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("RQUEUE_WAIT_REPLICAS", "-1"),
        ("RQUEUE_WAIT_REPLICAS", "1.5"),
        ("RQUEUE_WAIT_REPLICAS_TIMEOUT", "0"),
        ("RQUEUE_WAIT_REPLICAS_TIMEOUT", "inf"),
    ],
)
def test_replica_waits_out_of_range_are_refused_by_name(
    monkeypatch: pytest.MonkeyPatch, variable: str, value: str
) -> None:
    monkeypatch.setenv(variable, value)
    with pytest.raises(ConfigError, match=rf"^{variable} must be"):
        Config.resolve()
    with pytest.raises(ConfigError, match=r"^wait_replicas_timeout must be"):
        Config(wait_replicas_timeout=math.nan)


def test_using_refuses_a_bad_replica_count() -> None:
    with pytest.raises(InvalidTaskOption, match="wait_replicas must be a whole number"):
        apptasks.record.using(wait_replicas=-1)
    assert apptasks.record.using(wait_replicas=2).options.wait_replicas == 2


# -- a password in a URL that does not parse (issue #26, item 8) ------------------------

PIECES = ("Q1w2", "E3r4")
"""The two halves of the password ``Q1w2/E3r4`` (a base64 password holds ``/``), or of
``Q1w2?E3r4``...: neither may be printed, whatever the URL around them."""
LEAKY_URLS = [
    "redis://app:Q1w2/E3r4@127.0.0.1:1/0",  # redis-py: "Port could not be cast ... 'Q1w2'"
    "redis://app:Q1w2?E3r4@127.0.0.1:1/0",
    "redis://app:Q1w2#E3r4@127.0.0.1:1/0",
    "redis://:Q1w2/E3r4@127.0.0.1:1/0",
    "redis://Q1w2/E3r4@127.0.0.1:1/0",
    "redis://app:Q1w2 E3r4@127.0.0.1:1/0",
    "redis://Q1w2:E3r4/0",  # the host forgotten: the password sits where the port goes
    "redis+cluster://app:Q1w2/E3r4@127.0.0.1:1/0",
    "rediss+cluster://Q1w2:E3r4,127.0.0.1:1/0",
    "redis+sentinel://app:Q1w2/E3r4@127.0.0.1:1/m/0",
    "redis+sentinel://127.0.0.1:1/m/0?sentinel_password=Q1w2&E3r4",
    "redis+sentinel://127.0.0.1:1/m/0?sentinel_password=Q1w2#E3r4",
    "redis://127.0.0.1:1/0?password=Q1w2&E3r4",
    "redis://127.0.0.1:1/0?password=Q1w2#E3r4",
    "unix://:Q1w2/E3r4@/nonexistent/redis.sock",
    "Q1w2/E3r4@127.0.0.1:1/0",
]
"""Each a usage error, its message quoting no part of the URL."""
ENCODED_URLS = [
    "redis://app:Q1w2@E3r4@127.0.0.1:1/0",  # the last @ ends the password
    "redis://app:Q1w2%2FE3r4@127.0.0.1:1/0",
    "redis+cluster://app:Q1w2%3FE3r4@127.0.0.1:1/0",
    "redis+sentinel://app:Q1w2%23E3r4@127.0.0.1:1/m/0?sentinel_password=Q1w2%26E3r4",
    "redis://127.0.0.1:1/0?password=Q1w2%26E3r4&socket_timeout=1",
]
"""Well-formed: each reaches for Redis and reports it unreachable, password masked."""


def _assert_no_piece(*outputs: str) -> None:
    for output in outputs:
        for piece in PIECES:
            assert piece not in output, output


@pytest.mark.parametrize("url", LEAKY_URLS)
def test_a_password_in_a_malformed_url_is_never_printed(config: Config, url: str) -> None:
    for args in (("size",), ("size", "--redis-url", url)):
        result = cli(config, *args, env={"REDIS_URL": url})
        assert result.returncode == 2, result.stderr
        assert "invalid " in result.stderr and "Traceback" not in result.stderr
        _assert_no_piece(result.stdout, result.stderr)
    with pytest.raises(ConfigError) as caught:
        Config(redis_url=url)
    _assert_no_piece(str(caught.value), redact_url(url))


@pytest.mark.parametrize("char", ["/", "?", "#", "@", "&"])
def test_free_text_masks_a_password_holding_any_delimiter(char: str) -> None:
    """A URL quoted in a task's error or a log line is masked as far as its last @."""
    for url in (f"redis://app:Q1w2{char}E3r4@h/0", f"rediss+cluster://:Q1w2{char}E3r4@h:1,h:2/0"):
        shown = redact(f"connecting to {url}: failed")
        _assert_no_piece(shown)
        assert shown.endswith("***@h/0: failed") or shown.endswith("***@h:1,h:2/0: failed")
    shown = redact(f"at redis://h/0?password=Q1w2{char}E3r4&db=1 and mail@example.com")
    _assert_no_piece(shown)
    assert shown.startswith("at redis://") and shown.endswith("***&db=1 and mail@example.com")


@pytest.mark.parametrize("url", ENCODED_URLS)
def test_a_password_in_an_unreachable_url_is_never_printed(config: Config, url: str) -> None:
    result = cli(config, "size", env={"REDIS_URL": url, "RQUEUE_SOCKET_TIMEOUT": "1"})
    assert result.returncode == 1, result.stderr
    assert "cannot reach Redis at " in result.stderr and "***" in result.stderr
    _assert_no_piece(result.stdout, result.stderr)
    target = Config(redis_url=url).target
    _assert_no_piece(Config(redis_url=url).redacted_url(), repr(target))


def test_a_worker_logs_a_malformed_url_without_its_password(config: Config) -> None:
    url = "redis://app:Q1w2/E3r4@127.0.0.1:1/0"
    result = cli(config, "work", "-A", "apptasks", "--stop-when-empty", env={"REDIS_URL": url})
    assert result.returncode == 2, result.stderr
    _assert_no_piece(result.stdout, result.stderr)


# -- query options (issue #26, item 21) -------------------------------------------------


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ("foo=bar", "unknown option 'foo' in the Redis URL; allowed: db, socket_timeout"),
        (
            "ssl_cert_reqs=none",
            "unknown option 'ssl_cert_reqs' in the Redis URL (it needs rediss://)",
        ),
        ("socket_timeout=abc", "option socket_timeout of the Redis URL must be a number"),
        ("socket_timeout=nan", "option socket_timeout of the Redis URL must be a number"),
        ("socket_connect_timeout=inf", "option socket_connect_timeout of the Redis URL must be"),
        ("socket_keepalive=off", "option socket_keepalive of the Redis URL must be 1 or 0"),
        ("db=-1", "option db of the Redis URL must be a whole number"),
        ("db=1&db=2", "option db is given twice"),
        ("sentinel_password=x", "unknown option 'sentinel_password'"),
        ("sentinel_check_interval=5", "unknown option 'sentinel_check_interval'"),
    ],
)
def test_an_unknown_query_option_or_a_bad_value_is_refused_by_name(
    config: Config, query: str, message: str
) -> None:
    url = f"redis://127.0.0.1:1/0?{query}"
    result = cli(config, "size", env={"REDIS_URL": url})
    assert result.returncode == 2, result.stderr
    assert f"invalid REDIS_URL (from the environment): {message}" in result.stderr
    assert "Traceback" not in result.stderr
    with pytest.raises(ConfigError, match=r"^invalid Redis URL: ") as caught:
        Config(redis_url=url)
    assert message in str(caught.value)


def test_the_known_query_options_are_accepted_where_they_apply() -> None:
    for url in (
        "redis://h/0?socket_timeout=2.5&socket_connect_timeout=1&socket_keepalive=true"
        "&health_check_interval=0&client_name=app&db=3&username=u&password=p",
        "unix:///run/redis.sock?db=1",
        "rediss://h/0?ssl_cert_reqs=none&ssl_check_hostname=false&ssl_ca_certs=/ca.pem",
        "redis+sentinel://s/m/0?sentinel_username=w&sentinel_password=p&socket_timeout=1",
    ):
        assert Config(redis_url=url).target.node_url
