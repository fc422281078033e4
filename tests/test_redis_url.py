"""The three forms of a Redis URL, and the settings that depend on the topology.

Nothing here connects: each case reads a URL or a setting and checks what rqueue makes
of it, or that it is refused by name before any connection is tried.
"""

from __future__ import annotations

import math

import apptasks
import pytest
from support import cli

from rqueue.config import DISPATCH_RETRY, DISPATCH_RETRY_FAILOVER, Config, ConfigError
from rqueue.errors import InvalidTaskOption
from rqueue.redis_url import parse_redis_url
from rqueue.store.cluster import ClusterClient
from rqueue.store.keys import GlobalKeys
from rqueue.store.queue import RedisQueue


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


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("http://h/0", "unknown Redis URL scheme 'http://'"),
        ("redis+sentinel://s1:26379/", "names the master after the hosts"),
        ("redis+sentinel://s1:26379/mymaster/0/extra", "names the master after the hosts"),
        ("redis+cluster://h1:7000,:7001/0", "':7001' is not a host:port"),
        ("redis+cluster://h1:99999/0", "'h1:99999' is not a host:port"),
        ("redis+sentinel://s1:x/m/0", "'s1:x' is not a host:port"),
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
    assert "invalid REDIS_URL (from the environment): 'h:0' is not a host:port" in result.stderr


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
    )
    assert GlobalKeys.for_prefix("app:") == GlobalKeys(
        "app:rqueue:queues",
        "app:rqueue:restart",
        "app:rqueue:schedules",
        "app:rqueue:batches",
        "app:rqueue:workers",
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
