"""The worker listing on the ate wire, byte for byte against the notes' newest layout: the two
requests the client sends, and Worker / ActorAssignment answers (hand-built from field numbers,
no upstream code) read into WorkerInfo by presence."""

from __future__ import annotations

import pytest

from agentsession_core.substrate.ate import control_codec as cc
from agentsession_core.substrate.ate.proto import ateapi_pb2 as api
from agentsession_core.substrate.errors import BAD_BODY, SubstrateError
from agentsession_core.substrate.interface import WorkerInfo
from tests.unit.test_ate_wire_conformance import LEN, ld, num, ref, tag, varint

MEMORY_4GI = ld(1, ld(1, "memory") + ld(2, "4Gi"))  # Resources.limits[0] {name 1, quantity 2}


def test_list_workers_request() -> None:
    # page_size 1, page_token 2
    assert cc.list_workers_request("tok").SerializeToString() == num(1, 1000) + ld(2, "tok")


def test_list_worker_actor_assignments_request() -> None:
    # worker 1 (a global ref: atespace empty, so only name 2 goes out), page_size 2, token 3
    request = cc.list_worker_actor_assignments_request("w-1", "tok")
    assert request.SerializeToString() == ld(1, ld(2, "w-1")) + num(2, 1000) + ld(3, "tok")


def worker_bytes(*, status: bytes | None, extra: bytes = b"") -> bytes:
    # metadata 1 {name 2}, worker_pool 3, worker_pod 4, ip 7, status 11
    body = ld(1, ld(2, "w-1")) + ld(3, "gpu") + ld(4, "pod-1") + ld(7, "10.0.0.9") + extra
    return body + (ld(11, status) if status is not None else b"")


def assignment_bytes(atespace: str, name: str) -> bytes:
    # actor 2, actor_uid 3, metadata 6 {name 2 = the uid}
    return ld(2, ref(atespace, name)) + ld(3, f"uid-{name}") + ld(6, ld(2, f"uid-{name}"))


def assignments(*pairs: tuple[str, str]) -> list[api.ActorAssignment]:
    return [cc.parse(api.ActorAssignment, assignment_bytes(a, n)) for a, n in pairs]


def test_a_draining_worker_with_capacity_allocation_and_memory() -> None:
    # status: state 1 (DRAINING = 2), capacity 2 {resources 1, actors 2}, allocated 3 {actors 2}
    status = num(1, 2) + ld(2, ld(1, MEMORY_4GI) + num(2, 4)) + ld(3, num(2, 2))
    worker = cc.parse(api.Worker, worker_bytes(status=status))
    info = cc.worker_info(worker, assignments(("b", "y"), ("a", "x")))
    assert info == WorkerInfo(
        name="w-1",
        pool="gpu",
        capacity=4,
        allocated=2,
        state="draining",
        actors=("a/x", "b/y"),
        memory_limit_bytes=4 * 2**30,
    )


def test_a_worker_without_status_falls_back_on_its_assignments() -> None:
    """An older server sets no status: no capacity stated (0), allocated counted from the
    listing, the state unspecified; the name falls back on the pod."""
    body = ld(4, "pod-1") + ld(7, "10.0.0.9")
    info = cc.worker_info(cc.parse(api.Worker, body), assignments(("a", "x")))
    assert (info.name, info.pool, info.capacity, info.allocated) == ("pod-1", None, 0, 1)
    assert (info.state, info.actors, info.memory_limit_bytes) == ("unspecified", ("a/x",), None)


def test_a_newer_worker_state_and_fields_we_do_not_model_still_read() -> None:
    # sandbox_class 8 and labels 9 (a map entry {key 1, value 2}) are not in our Worker
    extra = ld(8, "gvisor") + ld(9, ld(1, "zone") + ld(2, "b"))
    worker = cc.parse(api.Worker, worker_bytes(status=num(1, 7), extra=extra))
    info = cc.worker_info(worker, [])
    assert (info.state, info.capacity, info.allocated) == ("unknown_7", 0, 0)


def test_an_allocation_of_zero_is_zero_not_the_listing() -> None:
    """allocated present with actors unset (0 on the wire is absent) is an empty worker."""
    status = num(1, 1) + ld(2, num(2, 1)) + ld(3, b"")
    info = cc.worker_info(cc.parse(api.Worker, worker_bytes(status=status)), [])
    assert (info.state, info.capacity, info.allocated) == ("active", 1, 0)


@pytest.mark.parametrize(
    "body",
    [
        pytest.param(
            worker_bytes(status=ld(2, tag(2, LEN) + varint(1) + b"x")), id="actors-as-bytes"
        ),
        pytest.param(worker_bytes(status=num(2, 5)), id="capacity-as-varint"),
    ],
)
def test_a_worker_written_to_another_schema_is_refused(body: bytes) -> None:
    with pytest.raises(SubstrateError) as caught:
        cc.parse(api.Worker, body)
    assert caught.value.code == BAD_BODY


def test_a_worker_memory_that_is_not_a_quantity_is_refused() -> None:
    status = ld(2, ld(1, ld(1, ld(1, "memory") + ld(2, "lots"))))
    worker = cc.parse(api.Worker, worker_bytes(status=status))
    with pytest.raises(SubstrateError, match="worker w-1 capacity: memory limit"):
        cc.worker_info(worker, [])
