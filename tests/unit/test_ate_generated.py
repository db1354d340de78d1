"""The committed protoc output matches the .proto files, and it imports as package modules."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

from agentsession_core.substrate.ate import regenerate

pytest.importorskip("grpc_tools", reason="grpcio-tools (the dev extra) regenerates the code")


def test_committed_generated_code_is_current(tmp_path: Path) -> None:
    fresh = regenerate.regenerate(tmp_path)
    names = regenerate.generated_names()
    assert sorted(p.name for p in fresh.iterdir() if p.is_file()) == sorted(names)
    stale = [
        name
        for name in names
        if (fresh / name).read_bytes() != (regenerate.PROTO_DIR / name).read_bytes()
    ]
    assert not stale, (
        f"generated code is stale for {stale}: run "
        "`python -m agentsession_core.substrate.ate.regenerate` and commit the result"
    )


def test_regenerate_cli_writes_under_out(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert regenerate.main(["--out", str(tmp_path)]) == 0
    printed = capsys.readouterr().out.split()
    assert len(printed) == len(regenerate.generated_names())
    assert all(Path(p).is_file() and Path(p).is_relative_to(tmp_path) for p in printed)


@pytest.mark.parametrize(
    ("module", "service", "methods"),
    [
        (
            "ateapi",
            "ateapi.Control",
            {
                "GetActorTemplate",
                "CreateAtespace",
                "CreateActor",
                "GetActor",
                "ListActors",
                "ResumeActor",
                "SuspendActor",
                "PauseActor",
                "RevertActor",
                "DeleteActor",
                "ListWorkers",
                "GetWorker",
                "DrainWorker",
                "ListWorkerActorAssignments",
            },
        ),
        (
            "glutton",
            "glutton.Glutton",
            {
                "WriteRAM",
                "ReadRAM",
                "WriteDisk",
                "ReadDisk",
                "OpenFD",
                "Ping",
                "Gossip",
                "BurnCPU",
                "Ingest",
                "UseCPU",
            },
        ),
    ],
)
def test_generated_modules_import_as_package_paths(
    module: str, service: str, methods: set[str]
) -> None:
    base = "agentsession_core.substrate.ate.proto"
    messages = importlib.import_module(f"{base}.{module}_pb2")
    stubs = importlib.import_module(f"{base}.{module}_pb2_grpc")
    (descriptor,) = messages.DESCRIPTOR.services_by_name.values()
    # The full service name is what goes on the wire: /<package>.<Service>/<Method>.
    assert descriptor.full_name == service
    assert {m.name for m in descriptor.methods} == methods
    short = service.split(".")[1]
    assert hasattr(stubs, f"{short}Stub") and hasattr(stubs, f"{short}Servicer")


def test_the_newest_layout_is_whole_and_lives_in_a_pool_of_its_own() -> None:
    """ateapi_sep: the notes' 35 Control methods and 3 WorkerService ones, ~100 messages, in a
    descriptor pool apart from ateapi_pb2's (both define the ateapi.* names)."""
    base = "agentsession_core.substrate.ate.proto"
    newest = importlib.import_module(f"{base}.ateapi_sep_pb2")
    ours = importlib.import_module(f"{base}.ateapi_pb2")
    stubs = importlib.import_module(f"{base}.ateapi_sep_pb2_grpc")
    services = newest.DESCRIPTOR.services_by_name
    assert services["Control"].full_name == "ateapi.Control"
    assert len(services["Control"].methods) == 35
    assert {m.name for m in services["WorkerService"].methods} == {
        "SetWorkerCapacity",
        "MintAteomActorCertificate",
        "RequestActorSuspend",
    }
    assert len(newest.DESCRIPTOR.message_types_by_name) == 100
    assert newest.DESCRIPTOR.pool is not ours.DESCRIPTOR.pool
    assert newest.Actor is not ours.Actor
    assert hasattr(stubs, "ControlStub") and hasattr(stubs, "WorkerServiceServicer")
