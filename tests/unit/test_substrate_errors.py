"""docs/SPEC.md §3.4's failure table, the client's decoding of error answers, sizes, and the
snapshot store's round trip."""

from __future__ import annotations

import pytest

from agentsession_core.errors import UsageError
from agentsession_core.substrate.errors import FailureClass, SubstrateError, classify
from agentsession_core.substrate.http import error_from_answer
from local_substrate import store
from local_substrate.cli import parse_size

RETRY, REPLACE, LOUD, COUNT = (
    FailureClass.RETRY_LATER,
    FailureClass.REPLACE,
    FailureClass.MISCONFIGURED,
    FailureClass.COUNT,
)


@pytest.mark.parametrize(
    ("code", "status", "from_router", "message", "expected"),
    [
        ("RESOURCE_EXHAUSTED", 503, True, "", RETRY),
        ("RESOURCE_EXHAUSTED", 429, True, "", RETRY),
        ("UNAVAILABLE", 502, True, "", RETRY),
        ("DEADLINE_EXCEEDED", 504, True, "", RETRY),
        ("ACTOR_NOT_FOUND", 404, True, "", REPLACE),
        ("NOT_FOUND", 404, True, "", REPLACE),
        ("FAILED_PRECONDITION", 412, True, "", REPLACE),
        ("ABORTED", 409, True, "actor a/b crashed (its worker died)", REPLACE),
        ("ABORTED", 409, True, "concurrent update", COUNT),
        ("INVALID_ARGUMENT", 400, True, "", LOUD),
        ("UNAUTHENTICATED", 401, True, "", LOUD),
        ("NOT_FOUND", 404, False, "no file", COUNT),  # the glutton's own 404
        ("RESOURCE_EXHAUSTED", 429, False, "memory limit", COUNT),
        ("TRANSPORT", 0, True, "", COUNT),
        ("TIMEOUT", 0, True, "", COUNT),
        ("HTTP_500", 500, True, "", COUNT),
    ],
)
def test_failure_table(code, status, from_router, message, expected) -> None:
    assert classify(code, status, from_router=from_router, message=message) is expected
    error = SubstrateError(code, message, status=status, from_router=from_router)
    assert error.failure_class is expected


def test_error_body_decoding() -> None:
    body = b'{"error":{"code":"ACTOR_NOT_FOUND","message":"actor a/b not found"}}'
    error = error_from_answer(404, body, from_router=True)
    assert (error.code, error.status, error.message) == (
        "ACTOR_NOT_FOUND",
        404,
        "actor a/b not found",
    )
    assert error.failure_class is FailureClass.REPLACE
    garbled = error_from_answer(502, b"<html>bad gateway</html>", from_router=False)
    assert (garbled.code, garbled.failure_class) == ("HTTP_502", FailureClass.COUNT)
    assert "bad gateway" in garbled.message


@pytest.mark.parametrize(
    ("text", "size"),
    [
        ("1Gi", 1 << 30),
        ("512Mi", 512 << 20),
        ("1e6", 10**6),
        ("1000", 1000),
        ("1.5Ki", 1536),
        ("2k", 2000),
    ],
)
def test_parse_size(text: str, size: int) -> None:
    assert parse_size(text, "--template") == size


@pytest.mark.parametrize("text", ["", "0", "1.5", "-1Gi", "1GB", "Gi"])
def test_parse_size_rejects(text: str) -> None:
    with pytest.raises(UsageError, match="--max-op-size"):
        parse_size(text, "--max-op-size")


def test_store_round_trip_and_atomic_switch(tmp_path) -> None:
    directory = store.actor_dir(tmp_path, "a", "b")
    files = tmp_path / "files"
    files.mkdir()
    (files / "f").write_bytes(b"x" * 5000)
    (files / ".tmp-f-1").write_bytes(b"junk")  # an interrupted write is not state
    arrays = {"m": bytearray(range(256)) * 40}
    assert store.write_snapshot(directory, 1, arrays, {"m": 7}, files) == 256 * 40 + 5000
    # The glutton replaces files (temp + rename), so the link in v000001 keeps its bytes.
    (files / "g").write_bytes(b"y" * 10)
    (files / "g").replace(files / "f")
    assert (store.latest(directory) / "files" / "f").read_bytes() == b"x" * 5000
    store.write_snapshot(directory, 2, {"m": bytearray(b"new")}, {}, files)
    assert [p.name for p in directory.iterdir() if p.name.startswith("v")] == ["v000002"]
    out = tmp_path / "out"
    loaded, cursors, total = store.read_snapshot(directory, out)
    assert loaded == {"m": bytearray(b"new")} and cursors == {} and total == 13
    assert (out / "f").read_bytes() == b"y" * 10
    assert not (out / ".tmp-f-1").exists()
    empty, _, nothing = store.read_snapshot(store.actor_dir(tmp_path, "a", "new"), tmp_path / "e")
    assert empty == {} and nothing == 0
