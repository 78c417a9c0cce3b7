"""Client quotas and KIP-599's controller mutation quota over gRPC, in process: the AdminClient's
alter_client_quotas / describe_client_quotas against a plaintext node, `pykraft configs --entity-type users|clients`
round trips, throttling of CreateTopics / CreatePartitions / DeleteTopics with THROTTLING_QUOTA_EXCEEDED and
throttle_time_ms, the AdminClient waiting the throttle out, and a flood by one principal (over mutual TLS) throttled
while another principal's requests pass."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import grpc
import pytest
from authz_helpers import Clients, controllers, unfenced_broker, wait_for_leader
from structlog.testing import capture_logs
from test_acls_api import LiveNode, live_node

from controller.quota_control import CLIENT_ID, USER, FilterComponent, MatchType, QuotaAlteration, QuotaOp
from pykraft.api import controller_pb2 as pb
from pykraft.api import controller_pb2_grpc as pb_grpc
from pykraft.cli import main
from pykraft.client import AdminClient, NewPartitions, NewTopic
from pykraft.security.ca import CertFiles, ensure_cluster_certificates
from quorum.errors import Errors

RATE = "controller_mutation_rate"
THROTTLED = Errors.THROTTLING_QUOTA_EXCEEDED


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, CertFiles]:
    return ensure_cluster_certificates(tmp_path_factory.mktemp("ca"), ["controller-1", "alice", "bob", "admin"])


async def register_broker(live: LiveNode) -> None:
    async with asyncio.timeout(10):
        while not live.controller.active:
            await asyncio.sleep(0.01)
    async with grpc.aio.insecure_channel(live.bootstrap) as channel:
        await unfenced_broker(pb_grpc.ControllerStub(channel))


async def test_admin_client_alters_and_describes_quotas(tmp_path: Path) -> None:
    async with live_node(tmp_path) as live:
        admin = live.admin
        results = await admin.alter_client_quotas(
            [
                QuotaAlteration([(USER, "alice")], [QuotaOp(RATE, 10.0)]),
                QuotaAlteration([(USER, None)], [QuotaOp(RATE, 2.0)]),
                QuotaAlteration([(CLIENT_ID, "app")], [QuotaOp("no_such_key", 1.0)]),
                QuotaAlteration([(USER, "bob")], [QuotaOp(RATE, -1.0)]),
            ]
        )
        assert [r.error.code for r in results] == [Errors.NONE] * 2 + [Errors.INVALID_REQUEST] * 2
        assert results[2].error.message == "Invalid configuration key no_such_key"
        assert results[3].error.message == f"Quota {RATE} must be greater than 0"
        assert results[1].entity == [(USER, None)]
        [checked] = await admin.alter_client_quotas(
            [QuotaAlteration([(USER, "carol")], [QuotaOp(RATE, 1.0)])], validate_only=True
        )
        assert not checked.error.failed
        users = await admin.describe_client_quotas([FilterComponent(USER, MatchType.SPECIFIED)], strict=True)
        assert users == {((USER, "alice"),): {RATE: 10.0}, ((USER, None),): {RATE: 2.0}}
        assert await admin.describe_client_quotas([FilterComponent(USER, MatchType.DEFAULT)]) == {
            ((USER, None),): {RATE: 2.0}
        }
        with pytest.raises(Exception) as e:
            await admin.describe_client_quotas([FilterComponent(USER, MatchType.EXACT)])
        assert "MATCH_TYPE_EXACT" in str(e.value)


async def test_configs_cli_users_and_clients(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    async with live_node(tmp_path) as live:

        def run(*args: str) -> tuple[int, str, str]:
            capsys.readouterr()
            with capture_logs():
                try:
                    code = main(["configs", "--bootstrap-server", live.bootstrap, *args])
                except SystemExit as e:
                    code = int(e.code or 0)
                out = capsys.readouterr()
            return code, out.out, out.err

        async def cli(*args: str) -> tuple[int, str, str]:
            return await asyncio.to_thread(run, *args)

        alice = ("--entity-type", "users", "--entity-name", "alice")
        code, out, _ = await cli("--alter", "--add-config", f"{RATE}=10,producer_byte_rate=1024", *alice)
        assert (code, out) == (0, "Completed updating config for user alice.\n")
        code, out, _ = await cli("--alter", "--add-config", f"{RATE}=2", "--entity-type", "users", "--entity-default")
        assert (code, out) == (0, "Completed updating default config for users in the cluster.\n")
        code, out, _ = await cli(
            "--alter", "--add-config", f"{RATE}=5", "--entity-type", "clients", "--entity-name", "app"
        )
        assert (code, out) == (0, "Completed updating config for client app.\n")
        code, out, _ = await cli("--describe", *alice)
        assert out == f"Quota configs for user-principal 'alice' are {RATE}=10.0, producer_byte_rate=1024.0\n"
        code, out, _ = await cli("--describe", "--entity-type", "users")
        assert out.splitlines() == [  # the default entity first, then by name
            f"Quota configs for the default user-principal are {RATE}=2.0",
            f"Quota configs for user-principal 'alice' are {RATE}=10.0, producer_byte_rate=1024.0",
        ]
        code, out, _ = await cli("--describe", "--entity-type", "clients")
        assert out == f"Quota configs for client-id 'app' are {RATE}=5.0\n"
        code, out, _ = await cli("--alter", "--delete-config", "producer_byte_rate", *alice)
        assert code == 0
        code, out, _ = await cli("--describe", *alice)
        assert out == f"Quota configs for user-principal 'alice' are {RATE}=10.0\n"
        # refusals: a key the entity does not have, the controller's validation, a value that is not a number
        code, _, err = await cli("--alter", "--delete-config", "consumer_byte_rate", *alice)
        assert (code, err) == (1, "Invalid config(s): consumer_byte_rate\n")
        code, _, err = await cli("--alter", "--add-config", "bogus=1", *alice)
        assert code == 1 and "InvalidRequestException: Invalid configuration key bogus" in err
        code, _, err = await cli("--alter", "--add-config", f"{RATE}=fast", *alice)
        assert (code, err) == (1, f"Cannot parse quota configuration value for {RATE}: fast\n")
        code, _, err = await cli("--alter", "--add-config", f"{RATE}=1", "--entity-type", "users")
        assert code == 2 and "An entity-name or default entity must be specified with --alter of users" in err
        # kafka-configs.sh's shorthands: a user and client-id pair, the defaults, Java's Double.toString
        code, out, _ = await cli("--alter", "--add-config", f"{RATE}=1e7", "--user", "alice", "--client", "app")
        assert (code, out) == (0, "Completed updating config for user alice.\n")
        code, out, _ = await cli("--describe", "--user", "alice", "--client", "app")
        assert out == f"Quota configs for user-principal 'alice', client-id 'app' are {RATE}=1.0E7\n"
        code, out, _ = await cli("--alter", "--add-config", f"{RATE}=3", "--user-defaults", "--client-defaults")
        assert (code, out) == (0, "Completed updating default config for users in the cluster.\n")
        code, out, _ = await cli("--describe", "--user-defaults", "--client-defaults")
        assert out == f"Quota configs for the default user-principal, the default client-id are {RATE}=3.0\n"
        code, _, err = await cli("--describe", "--user", "a", "--entity-type", "users")
        assert code == 2 and "can't be used with --user or --client" in err
        code, _, err = await cli("--describe", "--entity-type", "groups")
        assert code == 2 and "topics, brokers, users, clients" in err


class PausedClock:
    """A monotonic clock that stands still until :meth:`resume`, then runs on from where it stood."""

    def __init__(self) -> None:
        self.at = time.monotonic()
        self.resumed: float | None = None

    def resume(self) -> None:
        self.resumed = time.monotonic()

    def __call__(self) -> float:
        return self.at if self.resumed is None else self.at + time.monotonic() - self.resumed


async def test_throttled_topics_and_the_admin_client_waiting(tmp_path: Path) -> None:
    """client-id quota, rate 10/s (burst 110): 120 partitions go through (the bucket was not in debt), the next
    topic is throttled for about a second; the AdminClient waits it out and resends only that topic."""
    async with live_node(tmp_path) as live:
        clock = PausedClock()
        live.controller.mutation_quotas.clock = clock  # the bucket stands still until the retry part
        await register_broker(live)
        await live.admin.alter_client_quotas([QuotaAlteration([(CLIENT_ID, "flood")], [QuotaOp(RATE, 10.0)])])
        once = AdminClient(live.bootstrap, client_id="flood", retry_on_quota_violation=False)
        retrying = AdminClient(live.bootstrap, client_id="flood", default_api_timeout_ms=15_000)
        async with once, retrying:
            big = await once.create_topics([NewTopic("big", 120, 1)])
            assert big["big"].error_code == 0
            held = await once.create_topics([NewTopic("t1", 1, 1), NewTopic("t2", 1, 1)])
            assert [held[n].error_code for n in ("t1", "t2")] == [THROTTLED, THROTTLED]
            assert held["t1"].error_message == "The throttling quota has been exceeded."
            # the raw response names the wait: about (120 - 110) / 10 s
            async with grpc.aio.insecure_channel(live.bootstrap) as channel:
                raw = await pb_grpc.ControllerStub(channel).CreateTopics(
                    pb.CreateTopicsRequest(topics=[pb.CreateTopicsRequest.Topic(name="t3", num_partitions=1)]),
                    metadata=(("client-id", "flood"),),
                )
            assert raw.topics[0].error_code == THROTTLED and raw.throttle_time_ms == 1000
            # other clients are not limited
            assert (await live.admin.create_topics([NewTopic("free", 50, 1)]))["free"].error_code == 0
            # deletes and partition growth are recorded and throttled too
            grown = await once.create_partitions({"big": NewPartitions(130)})
            assert grown["big"].error.code == THROTTLED
            [deleted] = await once.delete_topics(["free"])
            assert deleted.error.code == THROTTLED
            # counted, per request, for kafka_controller_mutation_throttled_*: four requests, five topics
            stats = live.controller.mutation_quotas.stats
            assert (stats.throttled_requests, stats.throttled_topics) == (4, 5)
            assert stats.throttle_time_ms >= 4 * 1000 and stats.recorded_partitions == 120
            # a call whose deadline comes before the wait ends returns the throttled result as it is
            short = await retrying.create_topics([NewTopic("t1", 1, 1)], timeout_ms=200)
            assert short["t1"].error_code == THROTTLED and retrying.throttle_waits == 0
            clock.resume()  # from here the bucket refills in real time
            started = time.monotonic()
            ok = await retrying.create_topics([NewTopic("t1", 1, 1), NewTopic("t2", 1, 1)])
            assert [ok[n].error_code for n in ("t1", "t2")] == [0, 0] and retrying.throttle_waits >= 1
            assert time.monotonic() - started >= 0.9  # it waited the throttle out
            [deleted] = await retrying.delete_topics(["free"])
            assert not deleted.error.failed


async def test_a_flood_by_one_principal_is_throttled_while_another_passes(
    tmp_path: Path, certs: dict[str, CertFiles]
) -> None:
    """Over mutual TLS (each request's principal from its certificate), a user quota for alice, rate 1/s (burst
    11): her flood of one-partition topics is admitted while her bucket is not in debt, then throttled with a
    throttle time; bob, with no quota, creates as many as he likes meanwhile."""
    async with controllers(tmp_path, certs, super_users="User:admin;User:alice;User:bob") as nodes:
        node = await wait_for_leader(nodes)
        clients = Clients(certs, node.client_port)
        try:
            admin, alice, bob = clients.stub("admin"), clients.stub("alice"), clients.stub("bob")
            await unfenced_broker(admin)
            set_quota = pb.AlterClientQuotasRequest(
                entries=[
                    pb.AlterClientQuotasRequest.EntryData(
                        entity=[pb.ClientQuotaEntityData(entity_type="user", entity_name="alice")],
                        ops=[pb.AlterClientQuotasRequest.OpData(key=RATE, value=1.0)],
                    )
                ]
            )
            altered = await admin.AlterClientQuotas(set_quota, timeout=10)
            assert altered.entries[0].error_code == 0, altered

            def one(name: str) -> pb.CreateTopicsRequest:
                topic = pb.CreateTopicsRequest.Topic(name=name, num_partitions=1, replication_factor=1)
                return pb.CreateTopicsRequest(topics=[topic])

            started = time.monotonic()
            codes, waits = [], []
            for i in range(30):
                r = await alice.CreateTopics(one(f"alice-{i}"), timeout=10)
                codes.append(r.topics[0].error_code)
                waits.append(r.throttle_time_ms)
                b = await bob.CreateTopics(one(f"bob-{i}"), timeout=10)
                assert b.topics[0].error_code == 0 and b.throttle_time_ms == 0, b
            elapsed = time.monotonic() - started
            admitted = codes.count(0)
            assert codes[:12] == [0] * 12  # 11 tokens, and admitted once more at 0
            assert 12 <= admitted <= 12 + int(elapsed) + 1 and codes.count(THROTTLED) == 30 - admitted
            assert all(0 < w <= 1000 for c, w in zip(codes, waits, strict=True) if c == THROTTLED)
        finally:
            await clients.close()
