"""`pykraft node` settings: flags, --config files and --override merge into one NodeSettings, and a bad value is a
ConfigError naming the property — before any directory or port is touched."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from pykraft.cli import build_parser
from pykraft.node import ConfigError, settings_from_args
from quorum.log.log import PREALLOCATE_CHUNK

VOTERS = "1@127.0.0.1:19091,2@127.0.0.1:19092,3@127.0.0.1:19093"


def settings(tmp_path: Path, *extra: str):
    argv = ["node", "--node-id", "1", "--controller-quorum-voters", VOTERS, "--data-dir", str(tmp_path), *extra]
    return settings_from_args(build_parser().parse_args(argv))


def test_defaults_follow_kafka(tmp_path: Path) -> None:
    s = settings(tmp_path)
    assert s.node_id == 1 and sorted(s.voters) == [1, 2, 3]
    assert s.log.preallocate_bytes == 0  # log.preallocate=false
    assert s.log.segment_bytes == 1024 * 1024 * 1024  # metadata.log.segment.bytes


@pytest.mark.parametrize(
    ("value", "expected"), [("true", PREALLOCATE_CHUNK), ("TRUE ", PREALLOCATE_CHUNK), ("false", 0)]
)
def test_log_preallocate_override(tmp_path: Path, value: str, expected: int) -> None:
    assert settings(tmp_path, "--override", f"log.preallocate={value}").log.preallocate_bytes == expected


def test_config_file_then_override_wins(tmp_path: Path) -> None:
    props = tmp_path / "node.properties"
    props.write_text("metadata.log.segment.bytes=8388608\nlog.preallocate=true\n")
    s = settings(tmp_path, "--config", str(props), "--override", "metadata.log.segment.bytes=16777216")
    assert s.log.segment_bytes == 16 * 1024 * 1024
    assert s.log.preallocate_bytes == PREALLOCATE_CHUNK


@pytest.mark.parametrize(
    ("override", "named"),
    [
        ("log.preallocate=yes", "log.preallocate"),
        ("novalue", "expected NAME=VALUE"),
        ("metadata.log.segment.bytes=abc", "metadata.log.segment.bytes must be an integer"),
        ("metadata.log.segment.bytes=10", "metadata.log.segment.bytes"),
        ("controller.quorum.election.timeout.ms=-5", "controller.quorum.election.timeout.ms"),
        ("replica.placement.strategy=nope", "replica.placement.strategy"),
        ("pykraft.quorum.fetch.silence.ms=500", "fetch.silence.ms must be 0 \\(off\\) or above the fetch max wait"),
        ("pykraft.quorum.fetch.silence.ms=soon", "pykraft.quorum.fetch.silence.ms must be an integer"),
        ("pykraft.quorum.high.watermark.linger.ms=501", "linger.ms must be at most the fetch max wait \\(500 ms\\)"),
        ("pykraft.quorum.high.watermark.linger.ms=-1", "pykraft.quorum.high.watermark.linger.ms must not be negative"),
        ("pykraft.quorum.frames.port=-2", "pykraft.quorum.frames.port must be -1 \\(off\\), 0"),
        ("pykraft.quorum.frames.port=65536", "pykraft.quorum.frames.port must be -1 \\(off\\), 0"),
        ("pykraft.quorum.frames.port=any", "pykraft.quorum.frames.port must be an integer"),
        ("pykraft.memory.huge.pages=yes", "pykraft.memory.huge.pages must be true or false"),
    ],
)
def test_bad_values_are_config_errors_naming_the_property(tmp_path: Path, override: str, named: str) -> None:
    with pytest.raises(ConfigError, match=named):
        settings(tmp_path, "--override", override)


def test_the_silence_rule_is_on_by_default_and_can_be_turned_off(tmp_path: Path) -> None:
    assert settings(tmp_path).raft.fetch_silence_ms == 900
    assert settings(tmp_path, "--override", "pykraft.quorum.fetch.silence.ms=0").raft.fetch_silence_ms == 0
    assert settings(tmp_path, "--override", "pykraft.quorum.fetch.silence.ms=1200").raft.fetch_silence_ms == 1200


def test_the_high_watermark_linger_defaults_to_10_ms_and_0_is_kafkas_rule(tmp_path: Path) -> None:
    assert settings(tmp_path).raft.high_watermark_linger_ms == 10
    override = "pykraft.quorum.high.watermark.linger.ms=0"
    assert settings(tmp_path, "--override", override).raft.high_watermark_linger_ms == 0


def test_the_observer_linger_defaults_to_25_ms_and_0_answers_at_once(tmp_path: Path) -> None:
    assert settings(tmp_path).raft.observer_linger_ms == 25
    override = "pykraft.quorum.observer.linger.ms=0"
    assert settings(tmp_path, "--override", override).raft.observer_linger_ms == 0
    with pytest.raises(ConfigError, match=r"pykraft\.quorum\.observer\.linger\.ms must be at most the fetch max wait"):
        settings(tmp_path, "--override", "pykraft.quorum.observer.linger.ms=501")


def test_peer_frames_are_on_by_default_on_any_free_port_and_can_be_turned_off(tmp_path: Path) -> None:
    assert settings(tmp_path).frames_port == 0
    assert settings(tmp_path, "--override", "pykraft.quorum.frames.port=-1").frames_port == -1
    assert settings(tmp_path, "--override", "pykraft.quorum.frames.port=9191").frames_port == 9191


def test_huge_pages_are_on_by_default_and_can_be_turned_off(tmp_path: Path) -> None:
    assert settings(tmp_path).huge_pages
    assert not settings(tmp_path, "--override", "pykraft.memory.huge.pages=false").huge_pages


def test_missing_config_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"--config .*missing\.properties"):
        settings(tmp_path, "--config", str(tmp_path / "missing.properties"))


def test_lifecycle_settings_take_kafkas_names_and_refuse_bad_values() -> None:
    from pykraft.node import controller_settings

    s = controller_settings(
        {
            "delete.topic.enable": "false",
            "auto.leader.rebalance.enable": "FALSE",
            "leader.imbalance.check.interval.seconds": "30",
        }
    )
    assert (s.delete_topic_enable, s.auto_leader_rebalance_enable, s.leader_imbalance_check_interval_s) == (
        False,
        False,
        30,
    )
    defaults = controller_settings({})
    assert (defaults.delete_topic_enable, defaults.auto_leader_rebalance_enable) == (True, True)
    assert defaults.leader_imbalance_check_interval_s == 300
    for name, value, words in (
        ("delete.topic.enable", "yes", "delete.topic.enable must be true or false"),
        ("leader.imbalance.check.interval.seconds", "soon", "must be an integer"),
        ("leader.imbalance.check.interval.seconds", "0", "must be at least 1"),
    ):
        try:
            controller_settings({name: value})
        except ValueError as e:
            assert words in str(e), e
        else:
            raise AssertionError(f"{name}={value} was accepted")


def test_the_snapshot_growth_ratio_is_a_non_negative_number() -> None:
    from pykraft.node import controller_settings

    assert controller_settings({}).snapshot_growth_ratio == 1.0
    assert controller_settings({"pykraft.snapshot.growth.ratio": "0.5"}).snapshot_growth_ratio == 0.5
    for value, words in (
        ("lots", "pykraft.snapshot.growth.ratio must be a number, got 'lots'"),
        ("-1", "must not be negative"),
    ):
        with pytest.raises(ValueError, match=words):
            controller_settings({"pykraft.snapshot.growth.ratio": value})


def test_the_shutdown_snapshot_minimum_is_bytes_or_minus_one_for_never() -> None:
    from pykraft.node import controller_settings

    name = "pykraft.shutdown.snapshot.min.bytes"
    assert controller_settings({}).shutdown_snapshot_min_bytes == 1 << 20
    assert controller_settings({name: "-1"}).shutdown_snapshot_min_bytes == -1
    assert controller_settings({name: "0"}).shutdown_snapshot_min_bytes == 0
    for value, words in (("-2", "must be -1 \\(never\\) or more, got -2"), ("1MiB", "must be an integer")):
        with pytest.raises(ValueError, match=words):
            controller_settings({name: value})


def test_broker_configs_in_the_properties_are_the_static_level() -> None:
    from pykraft.node import controller_settings

    s = controller_settings({"unclean.leader.election.enable": "true", "num.partitions": "3", "node.id": "1"})
    assert s.static_broker_configs == {"unclean.leader.election.enable": "true", "num.partitions": "3"}
    try:
        controller_settings({"min.insync.replicas": "0"})
    except ValueError as e:
        assert "min.insync.replicas" in str(e), e
    else:
        raise AssertionError("min.insync.replicas=0 was accepted")


def test_event_queue_bound_and_quota_windows_are_settings(tmp_path: Path) -> None:
    """controller.event.queue.max.size (ours), controller.quota.window.num and controller.quota.window.size.seconds
    (Kafka's): defaults 10,000, 11 and 1; at least 1 each; the controller's queue and buckets take them."""
    from controller.quorum_controller import QuorumController
    from pykraft.node import controller_settings

    defaults = controller_settings({})
    assert (defaults.event_queue_max_size, defaults.quota_window_num, defaults.quota_window_size_s) == (10_000, 11, 1)
    s = settings(
        tmp_path,
        "--override",
        "controller.event.queue.max.size=50",
        "--override",
        "controller.quota.window.num=3",
        "--override",
        "controller.quota.window.size.seconds=2",
    ).controller
    assert (s.event_queue_max_size, s.quota_window_num, s.quota_window_size_s) == (50, 3, 2)
    controller = QuorumController(1, object(), s)  # type: ignore[arg-type]  # not started: no Raft needed
    assert controller.queue.max_size == 50
    assert controller.mutation_quotas.burst_s == 6.0  # a bucket holds rate x 3 x 2 s
    for name in (
        "controller.event.queue.max.size",
        "controller.quota.window.num",
        "controller.quota.window.size.seconds",
    ):
        for value, words in (("0", "at least 1, got 0"), ("-3", "at least 1, got -3"), ("many", "an integer")):
            with pytest.raises(ConfigError, match=f"^{re.escape(name)} must be {words}"):
                settings(tmp_path, "--override", f"{name}={value}")
