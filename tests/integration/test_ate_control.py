"""ControlClient against a real grpc.aio server on loopback implementing ateapi.Control with the
generated servicer base: the nine calls, bearer auth, deadlines, the concurrent-update retry,
the elapsed trailer, TLS with the server-name override, and mTLS."""

from __future__ import annotations

import asyncio
import datetime
import random
import time
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from google.protobuf.message import Message

from agentsession_core.errors import UsageError
from agentsession_core.substrate.ate import control_codec as cc
from agentsession_core.substrate.ate.control import (
    DEFAULT_SERVER_NAME,
    MAX_ATTEMPTS,
    RETRY_DELAY,
    ControlClient,
    Target,
    parse_target,
)
from agentsession_core.substrate.ate.proto import ateapi_pb2 as pb
from agentsession_core.substrate.ate.proto import ateapi_pb2_grpc as pb_grpc
from agentsession_core.substrate.errors import FailureClass, SubstrateError
from agentsession_core.substrate.interface import ActorInfo

ELAPSED_US = "1234"


@dataclass
class Seen:
    method: str
    request: bytes
    authorization: str | None


@dataclass
class FakeControl(pb_grpc.ControlServicer):
    """A tiny in-memory Control: enough state for the calls to answer like the real one."""

    seen: list[Seen] = field(default_factory=list)
    actors: dict[tuple[str, str], pb.Actor] = field(default_factory=dict)
    # method → (status, message) to answer with for the next N calls, then behave
    faults: dict[str, list[tuple[grpc.StatusCode, str]]] = field(default_factory=dict)
    delay: float = 0.0
    elapsed: str | None = ELAPSED_US

    async def _enter(self, method: str, request: Message, context: Any) -> None:
        metadata = dict(context.invocation_metadata() or ())
        self.seen.append(Seen(method, request.SerializeToString(), metadata.get("authorization")))
        if self.elapsed is not None:
            context.set_trailing_metadata((("x-server-elapsed-us", self.elapsed),))
        if self.delay:
            await asyncio.sleep(self.delay)
        pending = self.faults.get(method)
        if pending:
            code, message = pending.pop(0)
            await context.abort(code, message)

    async def _state(self, ref: pb.ObjectRef, state: pb.ActorState, context: Any) -> pb.Actor:
        key = (ref.atespace, ref.name)
        if key not in self.actors:
            await context.abort(grpc.StatusCode.NOT_FOUND, f"actor {ref.atespace}/{ref.name}")
        actor = self.actors[key]
        actor.metadata.version += 1
        actor.status.state = state
        if state == pb.ACTOR_STATE_RUNNING:
            actor.status.worker_assignment.worker_pod_ip = "10.0.0.5"
            actor.status.worker_assignment.worker.name = "worker-1"
        else:
            actor.status.ClearField("worker_assignment")
        return actor

    async def GetActorTemplate(self, request: Any, context: Any) -> pb.ActorTemplate:
        await self._enter("GetActorTemplate", request, context)
        ref = request.actor_template
        return pb.ActorTemplate(
            metadata=pb.ResourceMetadata(atespace=ref.atespace, name=ref.name),
            resources=pb.Resources(limits=[pb.Limits(name="memory", quantity="2Gi")]),
        )

    async def CreateAtespace(self, request: Any, context: Any) -> pb.Atespace:
        await self._enter("CreateAtespace", request, context)
        atespace: pb.Atespace = request.atespace
        return atespace

    async def CreateActor(self, request: Any, context: Any) -> pb.Actor:
        await self._enter("CreateActor", request, context)
        actor = pb.Actor()
        actor.CopyFrom(request.actor)
        actor.metadata.version = 1
        actor.status.state = pb.ACTOR_STATE_SUSPENDED
        self.actors[(actor.metadata.atespace, actor.metadata.name)] = actor
        return actor

    async def GetActor(self, request: Any, context: Any) -> pb.Actor:
        await self._enter("GetActor", request, context)
        key = (request.actor.atespace, request.actor.name)
        if key not in self.actors:
            await context.abort(grpc.StatusCode.NOT_FOUND, "no such actor")
        return self.actors[key]

    async def ListActors(self, request: Any, context: Any) -> pb.ListActorsResponse:
        await self._enter("ListActors", request, context)
        mine = [a for (space, _), a in sorted(self.actors.items()) if space == request.atespace]
        start = int(request.page_token or 0)
        page = mine[start : start + request.page_size]
        more = start + request.page_size < len(mine)
        token = str(start + request.page_size) if more else ""
        return pb.ListActorsResponse(actors=page, next_page_token=token)

    async def ResumeActor(self, request: Any, context: Any) -> pb.ResumeActorResponse:
        await self._enter("ResumeActor", request, context)
        return pb.ResumeActorResponse(
            actor=await self._state(request.actor, pb.ACTOR_STATE_RUNNING, context), resumed=True
        )

    async def SuspendActor(self, request: Any, context: Any) -> pb.SuspendActorResponse:
        await self._enter("SuspendActor", request, context)
        actor = await self._state(request.actor, pb.ACTOR_STATE_SUSPENDED, context)
        return pb.SuspendActorResponse(actor=actor)

    async def PauseActor(self, request: Any, context: Any) -> pb.PauseActorResponse:
        await self._enter("PauseActor", request, context)
        return pb.PauseActorResponse(
            actor=await self._state(request.actor, pb.ACTOR_STATE_PAUSED, context)
        )

    async def DeleteActor(self, request: Any, context: Any) -> pb.Actor:
        await self._enter("DeleteActor", request, context)
        actor = await self._state(request.actor, pb.ACTOR_STATE_DELETING, context)
        del self.actors[(request.actor.atespace, request.actor.name)]
        return actor


@dataclass
class Running:
    service: FakeControl
    port: int


async def start(service: FakeControl, credentials: Any = None) -> tuple[Any, Running]:
    server = grpc.aio.server()
    pb_grpc.add_ControlServicer_to_server(service, server)
    if credentials is None:
        port = server.add_insecure_port("127.0.0.1:0")
    else:
        port = server.add_secure_port("127.0.0.1:0", credentials)
    await server.start()
    return server, Running(service, port)


@pytest.fixture
async def plain() -> AsyncIterator[Running]:
    server, running = await start(FakeControl())
    yield running
    await server.stop(None)


@pytest.fixture
async def client_for(plain: Running) -> AsyncIterator[Callable[..., ControlClient]]:
    made: list[ControlClient] = []

    def make(**kwargs: Any) -> ControlClient:
        client = ControlClient(f"grpc://127.0.0.1:{plain.port}", **kwargs)
        made.append(client)
        return client

    yield make
    for client in made:
        await client.aclose()


# ---------------------------------------------------------------------------------------------


async def test_the_nine_calls_round_trip_with_the_codec_requests(
    plain: Running, client_for: Callable[..., ControlClient]
) -> None:
    client = client_for(token="secret")
    template = await client.get_actor_template("tmpl-ns", "coder")
    assert cc.template_info(template.message, "tmpl-ns", "coder").memory_limit_bytes == 2**31
    assert template.server_elapsed_us == int(ELAPSED_US)
    await client.create_atespace("bench")
    created = await client.create_actor("bench", "agent-1", "tmpl-ns", "coder")
    assert cc.actor_info(created.message) == ActorInfo("bench", "agent-1", "SUSPENDED", None, 1)
    resumed = await client.resume_actor("bench", "agent-1")
    assert resumed.message.resumed
    assert cc.worker_pod_ip(resumed.message.actor) == "10.0.0.5"
    got = await client.get_actor("bench", "agent-1")
    assert cc.actor_info(got.message) == ActorInfo("bench", "agent-1", "RUNNING", "worker-1", 2)
    listed = await client.list_actors("bench")
    assert [a.metadata.name for a in listed.message.actors] == ["agent-1"]
    assert listed.message.next_page_token == ""
    paused = await client.pause_actor("bench", "agent-1")
    assert cc.actor_status(paused.message.actor.status.state) == "PAUSED"
    suspended = await client.suspend_actor("bench", "agent-1")
    assert cc.actor_status(suspended.message.actor.status.state) == "SUSPENDED"
    await client.delete_actor("bench", "agent-1")
    assert not plain.service.actors

    # What reached the server is exactly what the codec builds (checked byte for byte
    # against the wire notes in tests/unit/test_ate_wire_conformance.py).
    expected: list[tuple[str, Message]] = [
        ("GetActorTemplate", cc.get_actor_template_request("tmpl-ns", "coder")),
        ("CreateAtespace", cc.create_atespace_request("bench")),
        ("CreateActor", cc.create_actor_request("bench", "agent-1", "tmpl-ns", "coder")),
        ("ResumeActor", cc.resume_actor_request("bench", "agent-1")),
        ("GetActor", cc.get_actor_request("bench", "agent-1")),
        ("ListActors", cc.list_actors_request("bench")),
        ("PauseActor", cc.pause_actor_request("bench", "agent-1")),
        ("SuspendActor", cc.suspend_actor_request("bench", "agent-1")),
        ("DeleteActor", cc.delete_actor_request("bench", "agent-1")),
    ]
    assert [(s.method, s.request) for s in plain.service.seen] == [
        (method, request.SerializeToString()) for method, request in expected
    ]
    assert {s.authorization for s in plain.service.seen} == {"Bearer secret"}


async def test_list_pages_follow_the_token(
    plain: Running, client_for: Callable[..., ControlClient]
) -> None:
    client = client_for()
    for n in range(5):
        await client.create_actor("bench", f"agent-{n}", "t", "t")
    first = await client.list_actors("bench", page_size=3)
    second = await client.list_actors("bench", first.message.next_page_token, page_size=3)
    names = [a.metadata.name for a in [*first.message.actors, *second.message.actors]]
    assert names == [f"agent-{n}" for n in range(5)]
    assert second.message.next_page_token == ""


async def test_no_token_sends_no_authorization(
    plain: Running, client_for: Callable[..., ControlClient]
) -> None:
    await client_for().create_atespace("bench")
    assert plain.service.seen[-1].authorization is None


async def test_token_file_is_read_on_every_call(
    plain: Running, client_for: Callable[..., ControlClient], tmp_path: Path
) -> None:
    token_file = tmp_path / "token"
    token_file.write_text("first\n")
    client = client_for(token_file=token_file)
    await client.create_atespace("bench")
    token_file.write_text("rotated")
    await client.create_atespace("bench")
    assert [s.authorization for s in plain.service.seen] == ["Bearer first", "Bearer rotated"]
    token_file.unlink()
    with pytest.raises(SubstrateError) as caught:
        await client.create_atespace("bench")
    assert caught.value.code == "UNAUTHENTICATED"
    assert caught.value.failure_class is FailureClass.MISCONFIGURED


async def test_elapsed_trailer_absent_is_none(
    plain: Running, client_for: Callable[..., ControlClient]
) -> None:
    plain.service.elapsed = None
    answer = await client_for().create_atespace("bench")
    assert answer.server_elapsed_us is None
    plain.service.elapsed = "not-a-number"
    assert (await client_for().create_atespace("bench")).server_elapsed_us is None


async def test_every_call_has_a_deadline(
    plain: Running, client_for: Callable[..., ControlClient]
) -> None:
    # The server never answers in the test's lifetime: only the deadline can end a call.
    plain.service.delay = 3600.0
    client = client_for(timeout=0.3)
    started = time.monotonic()
    with pytest.raises(SubstrateError) as caught:
        await client.create_atespace("bench")
    assert caught.value.code == "DEADLINE_EXCEEDED"
    assert caught.value.failure_class is FailureClass.RETRY_LATER
    assert time.monotonic() - started >= 0.3
    with pytest.raises(SubstrateError) as per_call:
        await client.get_actor("bench", "x", timeout=0.2)
    assert per_call.value.code == "DEADLINE_EXCEEDED"


async def test_errors_carry_the_grpc_status_name(
    plain: Running, client_for: Callable[..., ControlClient]
) -> None:
    client = client_for()
    with pytest.raises(SubstrateError) as caught:
        await client.get_actor("bench", "ghost")
    assert caught.value.code == "NOT_FOUND"
    assert caught.value.failure_class is FailureClass.REPLACE
    plain.service.faults["ResumeActor"] = [(grpc.StatusCode.RESOURCE_EXHAUSTED, "no room")]
    with pytest.raises(SubstrateError) as caught:
        await client.resume_actor("bench", "ghost")
    assert caught.value.code == "RESOURCE_EXHAUSTED"
    assert caught.value.failure_class is FailureClass.RETRY_LATER


async def test_concurrent_update_is_retried_first_at_once_then_with_seeded_jitter(
    plain: Running, client_for: Callable[..., ControlClient]
) -> None:
    conflict = (grpc.StatusCode.ABORTED, "Concurrent update of actor bench/agent-1, retry")
    plain.service.faults["CreateAtespace"] = [conflict] * 3
    slept: list[float] = []

    async def record(seconds: float) -> None:
        slept.append(seconds)
        await asyncio.sleep(seconds)

    client = client_for(rng=random.Random(7), sleep=record)
    answer = await client.create_atespace("bench")
    assert answer.attempts == 4
    assert len(plain.service.seen) == 4
    # Retry 1 goes at once (no sleep); retries 2 and 3 wait ~RETRY_DELAY drawn from the seed.
    twin = random.Random(7)
    assert slept == [RETRY_DELAY * (0.5 + twin.random()) for _ in range(2)]
    assert all(RETRY_DELAY / 2 <= s <= RETRY_DELAY * 1.5 for s in slept)


async def test_concurrent_update_gives_up_after_five_attempts(
    plain: Running, client_for: Callable[..., ControlClient]
) -> None:
    conflict = (grpc.StatusCode.ABORTED, "concurrent update")
    plain.service.faults["CreateAtespace"] = [conflict] * 10
    client = client_for()
    with pytest.raises(SubstrateError) as caught:
        await client.create_atespace("bench")
    assert caught.value.code == "ABORTED"
    assert len(plain.service.seen) == MAX_ATTEMPTS == 5
    assert caught.value.failure_class is FailureClass.COUNT


async def test_crash_and_other_aborts_are_not_retried(
    plain: Running, client_for: Callable[..., ControlClient]
) -> None:
    plain.service.faults["ResumeActor"] = [(grpc.StatusCode.ABORTED, "actor crashed")]
    with pytest.raises(SubstrateError) as caught:
        await client_for().resume_actor("bench", "agent-1")
    assert len(plain.service.seen) == 1
    assert caught.value.crashed
    assert caught.value.failure_class is FailureClass.REPLACE


async def test_retries_stay_inside_the_deadline(
    plain: Running, client_for: Callable[..., ControlClient]
) -> None:
    plain.service.faults["CreateAtespace"] = [(grpc.StatusCode.ABORTED, "concurrent update")] * 10
    # Each attempt takes at least 0.15 s on the server: at most three can start within the
    # call's 0.4 s, however fast or slow the machine; retries that ignored it make all five.
    plain.service.delay = 0.15
    client = client_for(timeout=0.4)
    with pytest.raises(SubstrateError):
        await client.create_atespace("bench")
    assert len(plain.service.seen) < MAX_ATTEMPTS


async def test_nothing_listening_is_unavailable() -> None:
    server, running = await start(FakeControl())
    await server.stop(None)  # the port is now closed
    client = ControlClient(f"grpc://127.0.0.1:{running.port}", timeout=30)
    try:
        with pytest.raises(SubstrateError) as caught:
            await client.get_actor("bench", "agent-1")
    finally:
        await client.aclose()
    assert caught.value.code == "UNAVAILABLE"


# ---------------------------------------------------------------------------------------------
# TLS


@dataclass
class Pki:
    ca: Path
    server_cert: bytes
    server_key: bytes
    client_cert: Path
    client_key: Path


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def _cert(
    subject: str,
    key: ec.EllipticCurvePrivateKey,
    issuer: x509.Certificate | None,
    issuer_key: ec.EllipticCurvePrivateKey,
    dns: str | None = None,
) -> x509.Certificate:
    now = datetime.datetime.now(datetime.UTC)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)])
    builder = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(issuer.subject if issuer else name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(x509.BasicConstraints(ca=issuer is None, path_length=None), critical=True)
    )
    if dns:
        builder = builder.add_extension(x509.SubjectAlternativeName([x509.DNSName(dns)]), False)
    return builder.sign(issuer_key, hashes.SHA256())


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pki]:
    root = tmp_path_factory.mktemp("pki")
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = _cert("test-ca", ca_key, None, ca_key)
    server_key = ec.generate_private_key(ec.SECP256R1())
    # The API server's certificate names only its service DNS name, never 127.0.0.1.
    server = _cert(DEFAULT_SERVER_NAME, server_key, ca, ca_key, dns=DEFAULT_SERVER_NAME)
    client_key = ec.generate_private_key(ec.SECP256R1())
    client = _cert("bench-client", client_key, ca, ca_key, dns="bench.client")
    pem = serialization.Encoding.PEM
    (root / "ca.crt").write_bytes(ca.public_bytes(pem))
    (root / "client.crt").write_bytes(client.public_bytes(pem))
    (root / "client.key").write_bytes(_key_pem(client_key))
    yield Pki(
        ca=root / "ca.crt",
        server_cert=server.public_bytes(pem),
        server_key=_key_pem(server_key),
        client_cert=root / "client.crt",
        client_key=root / "client.key",
    )


async def _tls_server(pki: Pki, *, mtls: bool) -> tuple[Any, Running]:
    credentials = grpc.ssl_server_credentials(
        [(pki.server_key, pki.server_cert)],
        root_certificates=pki.ca.read_bytes() if mtls else None,
        require_client_auth=mtls,
    )
    return await start(FakeControl(), credentials)


async def test_tls_verifies_the_service_name_not_the_dialled_address(pki: Pki) -> None:
    server, running = await _tls_server(pki, mtls=False)
    target = f"grpcs://127.0.0.1:{running.port}"
    good = ControlClient(target, ca_file=pki.ca, token="t")
    wrong_name = ControlClient(target, ca_file=pki.ca, server_name=None, timeout=30)
    try:
        answer = await good.create_atespace("bench")
        assert answer.server_elapsed_us == int(ELAPSED_US)
        assert running.service.seen[-1].authorization == "Bearer t"
        # Without the override the client checks 127.0.0.1 against the certificate: refused,
        # and named as the credential problem it is (not an UNAVAILABLE to retry forever).
        with pytest.raises(SubstrateError) as caught:
            await wrong_name.create_atespace("bench")
        assert caught.value.code == "UNAUTHENTICATED"
        assert caught.value.check is not None and "target.server_name" in caught.value.check
        assert "not valid for '127.0.0.1'" in caught.value.message
    finally:
        await good.aclose()
        await wrong_name.aclose()
        await server.stop(None)


async def test_mtls_presents_the_client_certificate(pki: Pki) -> None:
    server, running = await _tls_server(pki, mtls=True)
    target = f"grpcs://127.0.0.1:{running.port}"
    with_cert = ControlClient(
        target, ca_file=pki.ca, cert_file=pki.client_cert, key_file=pki.client_key
    )
    without = ControlClient(target, ca_file=pki.ca, timeout=30)
    try:
        await with_cert.create_atespace("bench")
        with pytest.raises(SubstrateError) as caught:
            await without.create_atespace("bench")
        assert caught.value.code == "UNAUTHENTICATED"
        assert caught.value.check is not None and "target.cert_file" in caught.value.check
        assert "none was given" in caught.value.message
        assert [s.method for s in running.service.seen] == ["CreateAtespace"]
    finally:
        await with_cert.aclose()
        await without.aclose()
        await server.stop(None)


# ---------------------------------------------------------------------------------------------
# configuration


@pytest.mark.parametrize(
    ("target", "expected"),
    [
        ("grpc://127.0.0.1:8080", Target(False, "127.0.0.1:8080")),
        ("grpcs://api.example.com", Target(True, "api.example.com:443")),
        ("grpcs://api.example.com:8443/", Target(True, "api.example.com:8443")),
        ("grpc://[::1]:9000", Target(False, "[::1]:9000")),
    ],
)
def test_targets(target: str, expected: Target) -> None:
    assert parse_target(target) == expected


@pytest.mark.parametrize(
    "target",
    ["http://h:1", "grpc://h", "grpc://:80", "grpcs://h:99999", "grpc://h:1/x", "h:1", ""],
)
def test_bad_targets(target: str) -> None:
    with pytest.raises(UsageError):
        parse_target(target)


def test_bad_configurations(tmp_path: Path) -> None:
    with pytest.raises(UsageError):
        ControlClient("grpc://h:1", token="a", token_file=tmp_path / "t")
    with pytest.raises(UsageError):
        ControlClient("grpcs://h", cert_file=tmp_path / "c")
    with pytest.raises(UsageError):
        ControlClient("grpc://h:1", ca_file=tmp_path / "ca")
    with pytest.raises(UsageError):
        ControlClient("grpcs://h", ca_file=tmp_path / "missing-ca")
    with pytest.raises(UsageError):
        ControlClient("grpc://h:1", timeout=0)
