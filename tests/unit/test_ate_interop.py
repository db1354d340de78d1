"""The interop check: our ateapi.proto (what the client is built from, and the local substrate
serves) against our rendering of the newest layout, ateapi_sep.proto, field by field
(wire_check.schema_differences). Then the check itself must be able to fail: each kind of
disagreement, planted in a copy of our schema, is named."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from google.protobuf import descriptor_pb2, descriptor_pool, empty_pb2, timestamp_pb2
from google.protobuf.descriptor import FileDescriptor
from google.protobuf.message import Message

from agentsession_core.substrate.ate import control_codec as cc
from agentsession_core.substrate.ate.proto import ateapi_pb2 as ours
from agentsession_core.substrate.ate.proto import ateapi_sep_pb2 as newest
from agentsession_core.substrate.ate.wire_check import schema_differences

Edit = Callable[[descriptor_pb2.FileDescriptorProto], None]


def test_our_schema_is_a_faithful_subset_of_the_newest() -> None:
    assert schema_differences(ours.DESCRIPTOR, newest.DESCRIPTOR) == []


def test_the_newest_has_what_we_leave_out() -> None:
    """The check is one-way on purpose: the newest layout's extra methods and fields reach
    us as unknown fields. Run the other way round, it lists them."""
    extra = schema_differences(newest.DESCRIPTOR, ours.DESCRIPTOR)
    assert "ateapi.Control/CreateTag: not in the newest layout" in extra
    assert any(line.startswith("ateapi.ActorStatus.external_snapshot (4)") for line in extra)


def test_what_the_client_sends_parses_under_the_newest_without_leftovers() -> None:
    """Every request the codec builds, read by a peer built from the newest layout: nothing
    it does not know (a removed field would be left over as an unknown field)."""
    requests: list[Message] = [
        cc.get_actor_template_request("ns", "t"),
        cc.create_atespace_request("a"),
        cc.create_actor_request("a", "x", "ns", "t", {"pool": "p"}),
        cc.get_actor_request("a", "x"),
        cc.list_actors_request("a", "tok"),
        cc.resume_actor_request("a", "x"),
        cc.suspend_actor_request("a", "x"),
        cc.pause_actor_request("a", "x"),
        cc.delete_actor_request("a", "x", version=3, uid="u"),
        cc.list_workers_request("tok"),
        cc.list_worker_actor_assignments_request("w-1", "tok"),
    ]
    for request in requests:
        theirs = getattr(newest, type(request).__name__).FromString(request.SerializeToString())
        leftover = type(theirs)()
        leftover.CopyFrom(theirs)
        leftover.DiscardUnknownFields()
        assert leftover.ByteSize() == theirs.ByteSize(), type(request).__name__
        assert theirs.SerializeToString() == request.SerializeToString()


def _variant(edit: Edit) -> FileDescriptor:
    """Our schema with one edit, in a pool of its own (the default one has ours)."""
    proto = descriptor_pb2.FileDescriptorProto()
    ours.DESCRIPTOR.CopyToProto(proto)
    edit(proto)
    pool = descriptor_pool.DescriptorPool()
    for dependency in (empty_pb2, timestamp_pb2):
        pool.AddSerializedFile(dependency.DESCRIPTOR.serialized_pb)
    pool.Add(proto)
    return pool.FindFileByName(proto.name)


def _message(
    proto: descriptor_pb2.FileDescriptorProto, name: str
) -> descriptor_pb2.DescriptorProto:
    return next(m for m in proto.message_type if m.name == name)


def _field(
    proto: descriptor_pb2.FileDescriptorProto, message: str, field: str
) -> descriptor_pb2.FieldDescriptorProto:
    return next(f for f in _message(proto, message).field if f.name == field)


def _add_boot(proto: descriptor_pb2.FileDescriptorProto) -> None:
    _message(proto, "ResumeActorRequest").field.add(
        name="boot", number=2, type=descriptor_pb2.FieldDescriptorProto.TYPE_BOOL, json_name="boot"
    )


def _renumber(proto: descriptor_pb2.FileDescriptorProto) -> None:
    _field(proto, "WorkerResources", "actors").number = 3


def _retype(proto: descriptor_pb2.FileDescriptorProto) -> None:
    _field(
        proto, "ResumeActorResponse", "resumed"
    ).type = descriptor_pb2.FieldDescriptorProto.TYPE_INT32


def _repeat(proto: descriptor_pb2.FileDescriptorProto) -> None:
    _field(proto, "Worker", "ip").label = descriptor_pb2.FieldDescriptorProto.LABEL_REPEATED


def _rename(proto: descriptor_pb2.FileDescriptorProto) -> None:
    _field(proto, "Actor", "source_tag").name = "source_snapshot_tag"


def _old_method(proto: descriptor_pb2.FileDescriptorProto) -> None:
    proto.service[0].method.add(
        name="CreateActorSnapshotTag",
        input_type=".ateapi.GetActorRequest",
        output_type=".ateapi.Actor",
    )


def _enum_value(proto: descriptor_pb2.FileDescriptorProto) -> None:
    state = next(e for e in proto.enum_type if e.name == "WorkerState")
    state.value.add(name="WORKER_STATE_CORDONED", number=3)


def _wrong_answer(proto: descriptor_pb2.FileDescriptorProto) -> None:
    method = next(m for m in proto.service[0].method if m.name == "DrainWorker")
    method.output_type = ".ateapi.ListWorkersResponse"


@pytest.mark.parametrize(
    ("edit", "named"),
    [
        (_add_boot, "ateapi.ResumeActorRequest.boot (2): no field 2 in the newest layout"),
        (_renumber, "ateapi.WorkerResources.actors (3): no field 3 in the newest layout"),
        (_retype, "ateapi.ResumeActorResponse.resumed (2): type int32, newest bool"),
        (_repeat, "ateapi.Worker.ip (7): repeated True, newest False"),
        (_rename, "ateapi.Actor.source_snapshot_tag (6): named source_tag in the newest layout"),
        (_old_method, "ateapi.Control/CreateActorSnapshotTag: not in the newest layout"),
        (_enum_value, "ateapi.WorkerState.WORKER_STATE_CORDONED = 3: not in the newest layout"),
        (
            _wrong_answer,
            "ateapi.Control/DrainWorker: output_type ateapi.ListWorkersResponse, "
            "newest ateapi.Worker",
        ),
    ],
)
def test_each_kind_of_disagreement_is_named(edit: Edit, named: str) -> None:
    assert schema_differences(_variant(edit), newest.DESCRIPTOR) == [named]
