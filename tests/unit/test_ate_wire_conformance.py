"""Our messages against the ate wire notes' tables, byte for byte, with no upstream code.

Every expected body is built by hand below from field numbers and wire types (varint = 0,
length-delimited = 2), so a wrong number, type or nesting in our .proto files or codecs
shows up as a byte difference. Requests: everything the driver sends. Answers: hand-built
bytes decoded through our code into the values the engine uses.
"""

from __future__ import annotations

import hashlib

import pytest
from google.protobuf.message import Message

from agentsession_core.script import Op
from agentsession_core.substrate.ate import control_codec as cc
from agentsession_core.substrate.ate import glutton_codec as gc
from agentsession_core.substrate.ate.proto import ateapi_pb2 as api
from agentsession_core.substrate.errors import BAD_BODY, FailureClass, SubstrateError
from agentsession_core.substrate.interface import ActorInfo, Template
from agentsession_core.substrate.protocol import ACTOR_STATUSES

# ---------------------------------------------------------------------------------------------
# a hand encoder for the protobuf wire format

VARINT, LEN = 0, 2


def varint(n: int) -> bytes:
    if n < 0:
        n += 1 << 64  # negative int32/int64 go on the wire as ten-byte two's complement
    out = bytearray()
    while True:
        low, n = n & 0x7F, n >> 7
        if n:
            out.append(low | 0x80)
        else:
            out.append(low)
            return bytes(out)


def tag(field: int, wire_type: int) -> bytes:
    return varint(field << 3 | wire_type)


def num(field: int, value: int) -> bytes:
    """A varint field (int32, int64, uint32, bool, enum)."""
    return tag(field, VARINT) + varint(value)


def ld(field: int, *parts: bytes | str) -> bytes:
    """A length-delimited field (string, bytes, or an embedded message given as its parts)."""
    data = b"".join(p.encode() if isinstance(p, str) else p for p in parts)
    return tag(field, LEN) + varint(len(data)) + data


def ref(atespace: str, name: str) -> bytes:
    """ObjectRef's fields: atespace 1, name 2."""
    return ld(1, atespace) + ld(2, name)


def test_the_hand_encoder_matches_the_notes_example() -> None:
    assert ref("a", "b") == bytes.fromhex("0a 01 61 12 01 62")
    assert cc.object_ref("a", "b").SerializeToString() == bytes.fromhex("0a0161120162")
    assert varint(300) == b"\xac\x02"
    assert varint(-1) == b"\xff" * 9 + b"\x01"


# ---------------------------------------------------------------------------------------------
# control requests (ateapi.Control, the newest layout in the notes)


@pytest.mark.parametrize(
    ("request_message", "expected"),
    [
        pytest.param(
            cc.get_actor_template_request("tmpl-ns", "coder"),
            ld(1, ref("tmpl-ns", "coder")),  # actor_template 1
            id="GetActorTemplateRequest",
        ),
        pytest.param(
            cc.create_atespace_request("bench"),
            # atespace 1 → Atespace.metadata 1 → ResourceMetadata.name 2
            ld(1, ld(1, ld(2, "bench"))),
            id="CreateAtespaceRequest",
        ),
        pytest.param(
            cc.create_actor_request("bench", "agent-7", "tmpl-ns", "coder"),
            # actor 1 → Actor{metadata 1 {atespace 1, name 2}, actor_template 4}
            ld(1, ld(1, ld(1, "bench"), ld(2, "agent-7")), ld(4, ref("tmpl-ns", "coder"))),
            id="CreateActorRequest",
        ),
        pytest.param(
            cc.get_actor_request("bench", "agent-7"),
            ld(1, ref("bench", "agent-7")),
            id="GetActorRequest",
        ),
        pytest.param(
            cc.list_actors_request("bench"),
            # atespace 1, page_size 2 (int32); an empty page_token is not sent
            ld(1, "bench") + num(2, 1000),
            id="ListActorsRequest-first",
        ),
        pytest.param(
            cc.list_actors_request("bench", page_token="p2", page_size=50),
            ld(1, "bench") + num(2, 50) + ld(3, "p2"),
            id="ListActorsRequest-next",
        ),
        pytest.param(
            cc.resume_actor_request("bench", "agent-7"),
            ld(1, ref("bench", "agent-7")),  # actor 1 only: SEP has no boot flag
            id="ResumeActorRequest",
        ),
        pytest.param(
            cc.suspend_actor_request("bench", "agent-7"),
            ld(1, ref("bench", "agent-7")),
            id="SuspendActorRequest",
        ),
        pytest.param(
            cc.pause_actor_request("bench", "agent-7"),
            ld(1, ref("bench", "agent-7")),
            id="PauseActorRequest",
        ),
        pytest.param(
            cc.delete_actor_request("bench", "agent-7"),
            ld(1, ref("bench", "agent-7")) + num(2, 1),  # any_state 2 (bool)
            id="DeleteActorRequest-any_state",
        ),
        pytest.param(
            cc.delete_actor_request("bench", "agent-7", version=12, uid="u-1"),
            # options 3 → DeleteOptions{version 1 (int64), uid 2}
            ld(1, ref("bench", "agent-7")) + num(2, 1) + ld(3, num(1, 12), ld(2, "u-1")),
            id="DeleteActorRequest-options",
        ),
        pytest.param(
            cc.delete_actor_request("bench", "agent-7", any_state=False),
            ld(1, ref("bench", "agent-7")),
            id="DeleteActorRequest-suspended-only",
        ),
    ],
)
def test_control_requests_match_the_notes(request_message: Message, expected: bytes) -> None:
    assert request_message.SerializeToString() == expected


# ---------------------------------------------------------------------------------------------
# glutton requests: the JSON wire's arguments in, the notes' protobuf body out

MI = 2**20


@pytest.mark.parametrize(
    ("route", "json", "expected"),
    [
        pytest.param("ping", {"message": "agentsession"}, ld(1, "agentsession"), id="ping"),
        pytest.param(
            "writeram",
            {"key": "agent_context", "size": 32 * MI, "mode": "overwrite"},
            # key 1, size 2 as a decimal string, write_mode 3 = OVERWRITE (1)
            ld(1, "agent_context") + ld(2, "33554432") + num(3, 1),
            id="writeram-overwrite",
        ),
        pytest.param(
            "writeram",
            {"key": "agent_context", "size": "64Mi", "mode": "overwrite_rotate"},
            ld(1, "agent_context") + ld(2, "67108864") + num(3, 2),
            id="writeram-rotate-quantity",
        ),
        pytest.param(
            "writeram",
            {"key": "k", "size": 4096, "mode": "truncate"},
            ld(1, "k") + ld(2, "4096"),  # TRUNCATE is 0: proto3 leaves it off the wire
            id="writeram-truncate",
        ),
        pytest.param("readram", {"key": "agent_context"}, ld(1, "agent_context"), id="readram"),
        pytest.param(
            "readram",
            {"key": "agent_context", "size": 8 * MI},
            ld(1, "agent_context") + ld(2, "8388608"),
            id="readram-size",
        ),
        pytest.param(
            "writedisk",
            {"key": "build_artifacts", "size": 24 * MI, "mode": "truncate"},
            ld(1, "build_artifacts") + num(2, 24 * MI),  # size 2 is an int32 here
            id="writedisk-truncate",
        ),
        pytest.param(
            "writedisk",
            {"key": "f", "size": 10, "mode": "overwrite"},
            ld(1, "f") + num(2, 10) + num(3, 1),
            id="writedisk-overwrite",
        ),
        pytest.param(
            "readdisk",
            {"key": "repo_tarball", "mode": "digest"},
            ld(1, "repo_tarball") + num(2, 1),  # read_mode 2 = DIGEST_ONLY (1)
            id="readdisk-digest",
        ),
        pytest.param(
            "readdisk",
            {"key": "repo_tarball", "mode": "data"},
            ld(1, "repo_tarball"),  # DATA is 0
            id="readdisk-data",
        ),
        pytest.param(
            "burncpu",
            {"millis": 1500, "parallel": 2},
            num(1, 1500) + num(2, 2),  # duration_ms 1 (int64), parallelism 2 (int32)
            id="burncpu",
        ),
        pytest.param(
            "burncpu", {"millis": 200, "parallel": 0}, num(1, 200) + num(2, 1), id="burncpu-0-is-1"
        ),
    ],
)
def test_glutton_requests_match_the_notes(route: str, json: dict, expected: bytes) -> None:
    assert gc.encode_request(route, json=json) == expected
    assert gc.encode_request(f"/{route}", json=json) == expected


def test_ping_encodings_are_kept_for_the_hot_path_and_bounded() -> None:
    # The wake probe is a ping with a fixed message: its bytes are built once and reused.
    first = gc.encode_request("ping", json={"message": "wake"})
    assert first == ld(1, "wake") and gc.encode_request("ping", json={"message": "wake"}) is first
    for n in range(200):  # many distinct messages: each still right, the memo stays bounded
        assert gc.encode_request("ping", json={"message": f"m{n}"}) == ld(1, f"m{n}")
    assert len(gc._PING_BODIES) <= gc._PING_BODIES_KEPT
    assert gc.encode_request("ping", json={}) == b""  # PingRequest{} is empty on the wire
    assert gc.encode_request("ping", json={"message": 7}) == ld(1, "7")  # as before: str()
    with pytest.raises(gc.GluttonEncodeError):
        gc.encode_request("ping", json=["not", "an", "object"])


def test_ingest_request_carries_key_and_payload() -> None:
    payload = bytes(range(256)) * 3
    expected = ld(1, "repo_tarball") + ld(2, payload)  # append 3 false: not sent
    assert gc.encode_request("ingest", body=payload, params={"key": "repo_tarball"}) == expected
    assert gc.ingest("repo_tarball", payload) == expected
    assert gc.ingest("k", b"x", append=True) == ld(1, "k") + ld(2, b"x") + num(3, 1)


# Each op kind as the engine's script model holds it, and the bytes its request must be.
ENGINE_OPS = [
    (Op(kind="ping"), "ping", ld(1, "agentsession")),
    (
        Op(kind="fill_ram", key="ctx", size=32 * MI),
        "writeram",
        ld(1, "ctx") + ld(2, "33554432") + num(3, 1),
    ),
    (
        Op(kind="churn_ram", key="ctx", size=8 * MI),
        "writeram",
        ld(1, "ctx") + ld(2, "8388608") + num(3, 2),
    ),
    (Op(kind="walk_ram", key="ctx"), "readram", ld(1, "ctx")),
    (Op(kind="write_disk", key="f", size=MI), "writedisk", ld(1, "f") + num(2, MI)),
    (Op(kind="read_disk_digest", key="f"), "readdisk", ld(1, "f") + num(2, 1)),
    (Op(kind="read_disk_data", key="f"), "readdisk", ld(1, "f")),
    (Op(kind="burn_cpu", millis=3000, parallel=2), "burncpu", num(1, 3000) + num(2, 2)),
]


@pytest.mark.parametrize(
    ("op", "route", "expected"), ENGINE_OPS, ids=lambda v: getattr(v, "kind", "")
)
def test_what_the_engine_sends_today_encodes_to_the_notes_bytes(
    op: Op, route: str, expected: bytes
) -> None:
    # The engine's own JSON-wire translation (docs/SPEC.md §1.2 → §2.3) feeds the codec.
    from agentsession_core.engine.ops import request_for

    json_route, json_body = request_for(op)
    assert json_route == route
    assert gc.encode_request(json_route, json=json_body) == expected


# ---------------------------------------------------------------------------------------------
# control answers: hand-built bytes in, the engine's values out

RUNNING, SUSPENDED = 2, 4


def actor_bytes(
    name: str, state: int, *, pod_ip: str = "", worker: str = "", version: int = 0
) -> bytes:
    meta = (
        ld(1, "bench") + ld(2, name) + ld(3, f"uid-{name}") + (num(4, version) if version else b"")
    )
    assignment = b""
    if pod_ip or worker:
        # WorkerAssignment: worker_pod 3, worker_pod_ip 5, worker 6 (ObjectRef, no atespace)
        assignment = ld(
            2, ld(3, f"pod-{name}"), ld(5, pod_ip), ld(6, ld(2, worker)) if worker else b""
        )
    status = ld(7, num(1, state), assignment)  # ActorStatus: state 1, worker_assignment 2
    return ld(1, meta) + ld(4, ref("tmpl-ns", "coder")) + status


def test_actor_running_with_a_worker_pod_ip() -> None:
    body = actor_bytes("agent-1", RUNNING, pod_ip="10.1.2.3", worker="worker-9", version=42)
    actor = cc.parse(api.Actor, body)
    assert actor.status.state == api.ACTOR_STATE_RUNNING
    assert cc.worker_pod_ip(actor) == "10.1.2.3"
    assert actor.actor_template == cc.object_ref("tmpl-ns", "coder")
    assert cc.actor_info(actor) == ActorInfo("bench", "agent-1", "RUNNING", "worker-9", 42)
    # Our own serialisation gives back the same bytes: nothing was lost or reordered.
    assert actor.SerializeToString() == body


def test_actor_without_worker_name_falls_back_to_pod_then_ip() -> None:
    actor = cc.parse(api.Actor, actor_bytes("agent-2", RUNNING, pod_ip="10.0.0.9"))
    assert cc.actor_info(actor).worker == "pod-agent-2"
    suspended = cc.parse(api.Actor, actor_bytes("agent-3", SUSPENDED))
    assert cc.worker_pod_ip(suspended) is None
    assert cc.actor_info(suspended) == ActorInfo("bench", "agent-3", "SUSPENDED", None, 0)


def test_resume_answer_says_whether_it_resumed() -> None:
    actor = actor_bytes("agent-1", RUNNING, pod_ip="10.1.2.3")
    answer = cc.parse(api.ResumeActorResponse, ld(1, actor) + num(2, 1))  # resumed 2 (bool)
    assert answer.resumed is True
    assert cc.actor_info(answer.actor).status == "RUNNING"
    already = cc.parse(api.ResumeActorResponse, ld(1, actor))
    assert already.resumed is False


@pytest.mark.parametrize("message_type", [api.SuspendActorResponse, api.PauseActorResponse])
def test_suspend_and_pause_answers_carry_the_actor(
    message_type: type[api.SuspendActorResponse] | type[api.PauseActorResponse],
) -> None:
    answer = cc.parse(message_type, ld(1, actor_bytes("agent-1", SUSPENDED)))
    assert cc.actor_info(answer.actor).status == "SUSPENDED"


def test_list_answer_with_two_actors_and_a_page_token() -> None:
    body = (
        ld(1, actor_bytes("agent-1", RUNNING, pod_ip="10.0.0.1"))
        + ld(1, actor_bytes("agent-2", SUSPENDED))
        + ld(2, "page-2")  # next_page_token 2
    )
    answer = cc.parse(api.ListActorsResponse, body)
    assert [cc.actor_info(a) for a in answer.actors] == [
        ActorInfo("bench", "agent-1", "RUNNING", "pod-agent-1", 0),
        ActorInfo("bench", "agent-2", "SUSPENDED", None, 0),
    ]
    assert answer.next_page_token == "page-2"


def limit(name: str, quantity: str) -> bytes:
    return ld(1, ld(1, name), ld(2, quantity))  # Resources.limits 1 → Limits{name 1, quantity 2}


def test_template_memory_limit_from_resources() -> None:
    body = ld(1, ld(1, "tmpl-ns"), ld(2, "coder")) + ld(
        7, limit("cpu", "500m"), limit("memory", "2Gi")
    )
    template = cc.parse(api.ActorTemplate, body)
    assert cc.memory_limit_bytes(template) == 2 * 2**30
    assert cc.template_info(template, "tmpl-ns", "coder") == Template("tmpl-ns", "coder", 2**31)


def test_template_with_the_fields_we_do_not_model_still_decodes() -> None:
    # containers 3, volumes 4, snapshot_config 5, sandbox_config 6 and status 8 are left out
    # of our ActorTemplate; a real answer carries them and must still decode.
    body = (
        ld(1, ld(1, "tmpl-ns"), ld(2, "coder"))
        + ld(2, ld(1, ld(1, "pool"), ld(2, "gvisor")))  # worker_selector: match_labels map
        + ld(3, ld(1, "glutton"), ld(2, "image:tag"))
        + ld(4, ld(1, "data"))
        + ld(5, num(1, 1))
        + ld(6, num(1, 1))
        + ld(7, limit("memory", "1536Mi"))
        + ld(8, num(1, 3))
    )
    template = cc.parse(api.ActorTemplate, body)
    assert dict(template.worker_selector.match_labels) == {"pool": "gvisor"}
    assert cc.template_info(template, "x", "y") == Template("tmpl-ns", "coder", 1536 * MI)
    # The fields we do not model survive a round trip (written after the known ones).
    again = template.SerializeToString()
    assert len(again) == len(body)
    for unmodelled in (ld(3, ld(1, "glutton"), ld(2, "image:tag")), ld(8, num(1, 3))):
        assert unmodelled in again


@pytest.mark.parametrize(
    ("limits", "expected"),
    [
        (b"", None),
        (limit("cpu", "2"), None),
        (limit("memory", "1G"), 10**9),
        (limit("memory", "1Gi") + limit("memory", "1024Mi"), 2**30),
    ],
)
def test_template_memory_limit_forms(limits: bytes, expected: int | None) -> None:
    template = cc.parse(api.ActorTemplate, ld(7, limits) if limits else b"")
    assert cc.memory_limit_bytes(template) == expected


@pytest.mark.parametrize(
    "limits",
    [
        limit("memory", "100m"),
        limit("memory", "lots"),
        limit("memory", "1Gi") + limit("memory", "2Gi"),
    ],
)
def test_template_memory_limit_that_cannot_be_read_is_refused(limits: bytes) -> None:
    template = cc.parse(api.ActorTemplate, ld(7, limits))
    with pytest.raises(SubstrateError) as caught:
        cc.memory_limit_bytes(template)
    assert caught.value.code == BAD_BODY


def test_every_actor_state_maps() -> None:
    engine = {
        1: "RESUMING",
        2: "RUNNING",
        3: "SUSPENDING",
        4: "SUSPENDED",
        5: "PAUSING",
        6: "PAUSED",
        7: "CRASHED",
    }
    for number, status in engine.items():
        assert api.ActorState.Name(number) == f"ACTOR_STATE_{status}"
        assert cc.actor_status(number) == status
    assert set(engine.values()) == set(ACTOR_STATUSES)
    assert cc.actor_status(8) == "DELETING"
    assert cc.actor_status(9) == "REVERTING"
    assert cc.actor_status(0) == "UNSPECIFIED"
    # A state newer than the notes (open enum: the number is kept) still reads.
    newer = cc.parse(api.Actor, ld(1, ld(1, "a"), ld(2, "b")) + ld(7, num(1, 23)))
    assert cc.actor_info(newer).status == "UNKNOWN_23"


def test_actor_answer_with_unknown_fields_decodes() -> None:
    body = (
        actor_bytes("agent-1", RUNNING, pod_ip="10.1.2.3")
        + num(99, 5)  # a new top-level field
        + ld(7, ld(42, "new-status-field"))  # and one inside status (merged into field 7)
    )
    actor = cc.parse(api.Actor, body)
    assert cc.actor_info(actor).status == "RUNNING"
    assert cc.worker_pod_ip(actor) == "10.1.2.3"


def test_actor_metadata_fallback_and_refusal() -> None:
    bare = cc.parse(api.Actor, ld(7, num(1, RUNNING)))
    assert cc.actor_info(bare, atespace="bench", name="agent-1").name == "agent-1"
    with pytest.raises(SubstrateError) as caught:
        cc.actor_info(bare)
    assert caught.value.code == BAD_BODY


@pytest.mark.parametrize(
    "body",
    [
        b"\xff\xff\xff",  # a tag that never ends
        b'{"name": "agent-1"}',  # JSON, not protobuf
        ld(1, "bench")[:-2],  # truncated length-delimited field
        ld(1, num(2, 1)) + ld(7, ld(1, "RUNNING")),  # state sent as a string: another schema
    ],
    ids=["bad-varint", "json", "truncated", "wrong-wire-type"],
)
def test_garbage_control_answers_are_refused(body: bytes) -> None:
    with pytest.raises(SubstrateError) as caught:
        cc.parse(api.Actor, body)
    assert caught.value.code == BAD_BODY


# ---------------------------------------------------------------------------------------------
# glutton answers

SHA = hashlib.sha256(b"agentsession").digest()


@pytest.mark.parametrize(
    ("route", "body", "expected"),
    [
        ("ping", ld(1, "agentsession"), gc.PingResult("agentsession")),
        ("writeram", b"", gc.WriteRamResult()),
        # ReadRAMResponse: size 1 (int64), checksum 2 (uint32, up to 2^32 - 1)
        ("readram", num(1, 96 * MI) + num(2, 2**32 - 1), gc.ReadRamResult(96 * MI, 2**32 - 1)),
        ("writedisk", num(1, 24 * MI) + ld(2, SHA), gc.WriteDiskResult(24 * MI, SHA)),
        ("readdisk", num(1, 4096) + ld(2, SHA), gc.ReadDiskResult(4096, SHA, b"")),
        (
            "readdisk",
            num(1, 5) + ld(2, SHA) + ld(3, b"hello"),
            gc.ReadDiskResult(5, SHA, b"hello"),
        ),
        ("burncpu", num(1, 123_456_789_012), gc.BurnCpuResult(123_456_789_012)),
        ("ingest", num(1, 16 * MI) + ld(2, SHA), gc.IngestResult(16 * MI, SHA)),
    ],
)
def test_glutton_answers_decode(route: str, body: bytes, expected: gc.GluttonResult) -> None:
    assert gc.decode_answer(route, body) == expected
    assert gc.decode_answer(f"/{route}", body, content_type="application/x-protobuf") == expected


def test_glutton_answer_with_unknown_fields_decodes() -> None:
    body = num(1, 10) + num(2, 7) + ld(15, "from a newer glutton") + num(2000, 1)
    assert gc.decode_answer("readram", body) == gc.ReadRamResult(10, 7)
    assert gc.decode_answer("writeram", ld(3, "x")) == gc.WriteRamResult()


@pytest.mark.parametrize(
    ("route", "body", "content_type"),
    [
        ("ping", b"\xff\xff\xff", None),
        ("readram", b"\x0c", None),  # an end-group tag with no group
        ("ping", ld(1, b"\xff\xfe"), None),  # a string field that is not UTF-8
        ("readram", ld(1, "12"), None),  # size as a string: a glutton of another schema
        ("writedisk", num(1, 10) + ld(2, b"short"), None),  # not a SHA-256
        ("ingest", num(1, -1) + ld(2, SHA), None),  # negative size
        ("ping", ld(1, "agentsession"), "application/json"),  # a JSON-wire glutton
        ("ping", b'{"message": "agentsession"}', None),
    ],
)
def test_glutton_garbage_is_refused_as_a_counted_glutton_failure(
    route: str, body: bytes, content_type: str | None
) -> None:
    with pytest.raises(SubstrateError) as caught:
        gc.decode_answer(route, body, content_type=content_type)
    error = caught.value
    assert error.code == BAD_BODY
    assert error.from_router is False
    assert error.failure_class is FailureClass.COUNT


@pytest.mark.parametrize(
    ("route", "json"),
    [
        ("writeram", {"key": "k", "size": 1, "mode": "sideways"}),
        ("readdisk", {"key": "k", "mode": "digest-only"}),
        ("writedisk", {"key": "k", "size": 2**31, "mode": "truncate"}),  # over int32
        ("writeram", {"key": "k", "size": "1.5", "mode": "overwrite"}),
        ("writeram", {"key": "k", "mode": "overwrite"}),
        ("burncpu", {"millis": 0, "parallel": 1}),
        ("burncpu", {"millis": 10, "parallel": 2**31}),
        ("usecpu", {}),
        ("ping", ["not", "an", "object"]),
    ],
)
def test_arguments_the_messages_cannot_carry_are_refused_before_sending(
    route: str, json: object
) -> None:
    with pytest.raises(gc.GluttonEncodeError):
        gc.encode_request(route, json=json)


def test_ingest_needs_its_key_and_payload() -> None:
    with pytest.raises(gc.GluttonEncodeError):
        gc.encode_request("ingest", body=b"x")
    with pytest.raises(gc.GluttonEncodeError):
        gc.encode_request("ingest", params={"key": "k"})
