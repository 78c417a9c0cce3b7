"""The Kafka listener on TLS: an SSL listener with the node's own certificate, where Kafka's clients get in only with a
certificate from the cluster's CA and act as the principal it maps to (the same mapping and ACLs as gRPC's), driven
by confluent-kafka (librdkafka) and kafka-python with their own SSL settings."""

from __future__ import annotations

import shutil
import socket
import ssl
import time
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AclBinding, AclOperation, AclPermissionType, ResourcePatternType, ResourceType
from confluent_kafka.admin import AdminClient as CkAdmin
from confluent_kafka.admin import NewTopic as CkNewTopic
from kafka_helpers import KafkaNode, kafka_node, read_frame

from controller.quorum_controller import ControllerSettings
from pykraft.kafka.apis.api_versions import ApiVersionsRequest
from pykraft.kafka.protocol import RequestHeader, encode_request
from pykraft.security.ca import CertFiles, ensure_cluster_certificates
from pykraft.security.tls import TlsSettings
from quorum.errors import Errors

with warnings.catch_warnings():  # kafka-python 3 loads its schemas with importlib.resources' deprecated calls
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka.admin import KafkaAdminClient
    from kafka.admin import NewTopic as KpNewTopic
pytestmark = pytest.mark.filterwarnings("ignore:.*is deprecated. Use files:DeprecationWarning")

AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
# The helper's own gRPC calls (broker registrations, heartbeats) are plaintext, so User:ANONYMOUS; the Kafka
# listener requires client certificates, so no Kafka client is ever ANONYMOUS here.
SUPER_USERS = "User:admin;User:ANONYMOUS"
# The node's mapping rules: the CN of alice, admin and the controller; nothing else maps (a principal refusal).
RULES = r"RULE:^CN=(admin|alice|controller-1)$/$1/"
HANDSHAKE_TIMEOUT_S = 1.0


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, CertFiles]:
    return ensure_cluster_certificates(tmp_path_factory.mktemp("kafka-ca"), ["controller-1", "admin", "alice", "carol"])


@pytest.fixture(scope="module")
def stranger(tmp_path_factory: pytest.TempPathFactory) -> CertFiles:
    """A certificate named like the cluster's admin, from another CA."""
    return ensure_cluster_certificates(tmp_path_factory.mktemp("other-ca"), ["admin"])["admin"]


def node_tls(files: CertFiles, rules: str | None = RULES) -> TlsSettings:
    return TlsSettings(certificate=files.certificate, key=files.key, ca=files.ca, principal_mapping_rules=rules)


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory, certs: dict[str, CertFiles]) -> Iterator[KafkaNode]:
    settings = ControllerSettings(max_idle_interval_ms=0, authorizer_class_name=AUTHORIZER, super_users=SUPER_USERS)
    with kafka_node(
        tmp_path_factory.mktemp("kafka-tls"),
        settings,
        tls=node_tls(certs["controller-1"]),
        listener_options={"handshake_timeout_s": HANDSHAKE_TIMEOUT_S},
    ) as node:
        yield node


def ck_admin(live: KafkaNode, files: CertFiles | None, ca: Path, **extra: str) -> CkAdmin:
    """confluent-kafka with the settings of our --command-config files (the same names as librdkafka's)."""
    config = {"bootstrap.servers": live.bootstrap, "security.protocol": "SSL", "ssl.ca.location": str(ca)}
    if files is not None:
        config |= {"ssl.certificate.location": str(files.certificate), "ssl.key.location": str(files.key)}
    return CkAdmin(config | {"log_level": 0, **extra})


def create_error(admin: CkAdmin, topic: str) -> KafkaError | None:
    try:
        admin.create_topics([CkNewTopic(topic, 1, 1)], request_timeout=10)[topic].result(10)
    except KafkaException as e:
        return e.args[0]
    return None


def test_the_admin_certificate_creates_and_lists_topics(live: KafkaNode, certs: dict[str, CertFiles]) -> None:
    admin = ck_admin(live, certs["admin"], certs["admin"].ca)
    assert create_error(admin, "tls-orders") is None
    assert "tls-orders" in admin.list_topics(timeout=10).topics
    # admin.properties as cluster up --tls writes it is a librdkafka configuration as it stands.
    props = {"security.protocol": "SSL", **certs["admin"].properties()}
    assert "tls-orders" in CkAdmin({"bootstrap.servers": live.bootstrap, **props}).list_topics(timeout=10).topics
    assert "tls-orders" in {t.name for t in live.run(live.admin.describe_topics(None))}  # gRPC sees it too


def test_no_certificate_another_ca_or_plaintext_is_refused(
    live: KafkaNode, certs: dict[str, CertFiles], stranger: CertFiles
) -> None:
    before = live.listener.stats.connections_refused["handshake"]
    for files in (None, stranger):  # both trust the cluster's CA; one has no certificate, one another CA's
        client = ck_admin(live, files, certs["admin"].ca, **{"reconnect.backoff.max.ms": "500"})
        with pytest.raises(KafkaException) as refused:
            client.list_topics(timeout=1)
        assert refused.value.args[0].code() == KafkaError._TRANSPORT, refused.value
    # A plaintext Kafka client's request is no TLS handshake: closed without an answer.
    with socket.create_connection(("127.0.0.1", live.listener.port), timeout=5) as sock:
        sock.sendall(encode_request(RequestHeader(18, 0, 1, "plain", 1), b""))
        assert read_frame(sock) is None
    assert live.listener.stats.connections_refused["handshake"] >= before + 3


def test_a_principal_without_acls_is_refused_until_an_acl_allows_it(
    live: KafkaNode, certs: dict[str, CertFiles]
) -> None:
    alice = ck_admin(live, certs["alice"], certs["alice"].ca)
    error = create_error(alice, "alice-orders")
    assert error is not None and error.code() == Errors.TOPIC_AUTHORIZATION_FAILED == 29, error
    assert "User:alice from host 127.0.0.1" in error.str(), error.str()  # the gRPC service's message, our principal
    admin = ck_admin(live, certs["admin"], certs["admin"].ca)
    acl = AclBinding(
        ResourceType.TOPIC,
        "alice-",
        ResourcePatternType.PREFIXED,
        "User:alice",
        "*",
        AclOperation.CREATE,
        AclPermissionType.ALLOW,
    )
    assert admin.create_acls([acl], request_timeout=10)[acl].result(10) is None
    assert create_error(alice, "alice-orders") is None
    assert "alice-orders" in {t.name for t in live.run(live.admin.describe_topics(None))}


def test_kafka_python_over_ssl(live: KafkaNode, certs: dict[str, CertFiles]) -> None:
    files = certs["admin"]
    client = KafkaAdminClient(
        bootstrap_servers=live.bootstrap,
        security_protocol="SSL",
        ssl_cafile=str(files.ca),
        ssl_certfile=str(files.certificate),
        ssl_keyfile=str(files.key),
        request_timeout_ms=10_000,
        client_id="kp-tls",
    )
    try:
        [created] = client.create_topics([KpNewTopic("kp-tls-orders", 2, 1)])["topics"]
        assert created["error_code"] == 0, created
        assert "kp-tls-orders" in client.list_topics()
    finally:
        client.close()


def tls_client(live: KafkaNode, files: CertFiles, ca: Path) -> ssl.SSLSocket:
    context = ssl.create_default_context(cafile=str(ca))
    context.load_cert_chain(files.certificate, files.key)
    sock = socket.create_connection(("127.0.0.1", live.listener.port), timeout=5)
    return context.wrap_socket(sock, server_hostname="127.0.0.1")


def api_versions_answered(sock: ssl.SSLSocket) -> bool:
    try:
        sock.sendall(
            encode_request(RequestHeader(18, 3, 7, "raw", 2), ApiVersionsRequest.encode(ApiVersionsRequest.cls(), 3))
        )
        return read_frame(sock) is not None
    except (ssl.SSLError, OSError):
        return False


def test_a_certificate_no_rule_maps_closes_the_connection(live: KafkaNode, certs: dict[str, CertFiles]) -> None:
    """carol's certificate is from the cluster's CA, but the node's rules map only admin, alice and controller-1."""
    before = live.listener.stats.connections_refused["principal"]
    with tls_client(live, certs["carol"], certs["carol"].ca) as sock:
        assert not api_versions_answered(sock)
    assert live.listener.stats.connections_refused["principal"] == before + 1
    with tls_client(live, certs["alice"], certs["alice"].ca) as sock:
        assert api_versions_answered(sock)


def test_a_silent_client_is_dropped_after_the_handshake_timeout(live: KafkaNode) -> None:
    before = live.listener.stats.connections_refused["handshake"]
    started = time.monotonic()
    with socket.create_connection(("127.0.0.1", live.listener.port), timeout=10) as sock:
        assert sock.recv(1) == b""  # closed by the listener, not by our timeout
    assert HANDSHAKE_TIMEOUT_S * 0.8 < time.monotonic() - started < HANDSHAKE_TIMEOUT_S + 5
    # The listener counts the refusal on its own thread after asyncio has closed the socket: a moment after our EOF.
    # (librdkafka clients of the test above may still be retrying in the background: more refusals than ours)
    deadline = time.monotonic() + 5
    while live.listener.stats.connections_refused["handshake"] < before + 1 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert live.listener.stats.connections_refused["handshake"] >= before + 1


def test_renewed_files_are_served_to_new_connections(
    live: KafkaNode, certs: dict[str, CertFiles], tmp_path: Path
) -> None:
    """The listener's files are replaced by another certificate of the same CA: the next connection sees it, the
    open one keeps working; a reload asked for (SIGHUP) rereads the files even when their stamps did not change."""
    tls = live.listener.tls
    assert tls is not None
    own = tls.tls
    assert own.certificate is not None and own.key is not None
    saved = tmp_path / "saved.crt", tmp_path / "saved.key"
    shutil.copy(own.certificate, saved[0])
    shutil.copy(own.key, saved[1])

    def served_name() -> str:
        with tls_client(live, certs["admin"], certs["admin"].ca) as sock:
            der = sock.getpeercert(binary_form=True)
        from cryptography import x509

        return x509.load_der_x509_certificate(der).subject.rfc4514_string()

    reloads = tls.reloads
    open_before = tls_client(live, certs["admin"], certs["admin"].ca)
    try:
        assert served_name() == "CN=controller-1"
        shutil.copy(certs["alice"].key, own.key)  # the key first: a half-renewed pair is not taken
        shutil.copy(certs["alice"].certificate, own.certificate)
        assert served_name() == "CN=alice" and tls.reloads == reloads + 1
        assert api_versions_answered(open_before)
        tls.request_reload()
        assert served_name() == "CN=alice" and tls.reloads == reloads + 2
    finally:
        open_before.close()
        shutil.copy(saved[1], own.key)
        shutil.copy(saved[0], own.certificate)
    assert served_name() == "CN=controller-1"
