"""A run directory that stops taking writes (issue #11): the run ends `failed` with the reason,
said once; status.json and the manifest still land where they can; never a stuck `running`."""

from __future__ import annotations

import asyncio
import errno
import json
import logging
import shutil
from pathlib import Path
from typing import Any

import pytest

from agentsession_core.engine.params import RunParams
from agentsession_core.output import run_dir as run_dir_module
from agentsession_core.output.run_dir import RunDir, verify_manifest
from agentsession_core.run.run import Run
from tests.unit.test_session import MemorySubstrate


def enospc(*args, **kwargs):
    raise OSError(errno.ENOSPC, "No space left on device")


def test_the_log_keeps_its_first_write_error_and_prints_no_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    handler = RunDir(tmp_path).log_handler()
    handler.stream.write = enospc  # type: ignore[method-assign]
    logger = logging.getLogger("test-run-log")
    logger.addHandler(handler)
    try:
        for i in range(5):
            logger.error("line %d", i)
    finally:
        logger.removeHandler(handler)
        handler.close()
    assert isinstance(handler.failure, OSError) and handler.failure.errno == errno.ENOSPC
    assert capsys.readouterr().err == ""


def test_status_and_manifest_fall_back_to_their_own_blocks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run_dir = RunDir(tmp_path)
    run_dir.write_json("status.json", {"status": "running"})
    run_dir.write_text("stats.csv", "a,b\n")
    run_dir.reserve_manifest()
    assert (tmp_path / "manifest.json").stat().st_size == 8 * 1024  # MANIFEST_RESERVE
    monkeypatch.setattr(run_dir_module, "atomic_write", enospc)  # no new file fits
    with pytest.raises(OSError):
        run_dir.write_json("gate.json", {})  # a new file: nowhere to go
    run_dir.write_json("status.json", {"status": "failed"}, in_place=True)
    run_dir.write_manifest("gate.json: No space left on device")
    assert json.loads((tmp_path / "status.json").read_text()) == {"status": "failed"}
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    assert manifest["incomplete"] == "gate.json: No space left on device"
    assert [e["path"] for e in manifest["files"]] == ["stats.csv", "status.json"]
    assert verify_manifest(tmp_path) == []


def test_a_run_whose_directory_vanishes_ends_failed_with_its_files_remade(
    tmp_path: Path,
) -> None:
    params = RunParams(
        script="smoke",
        think_scale=0.2,
        out=str(tmp_path),
        population={"kind": "closed", "sessions": 2, "spawn_rate": 100},
        cleanup={"stop_grace_seconds": 1},
    )
    substrate = MemorySubstrate()
    run = Run(params, substrate=substrate, handle_signals=False)
    armed: list[bool] = []
    write_progress = run._write_progress

    def write_then_remove(history: dict[str, str], status: dict[str, Any]) -> None:
        """An operator's rm -rf, a lost mount: once the sessions run, right after a
        once-a-second write (so none is half done), and so the next write finds it gone."""
        write_progress(history, status)
        if armed == [True]:
            armed.append(True)
            shutil.rmtree(run.run_dir.path)

    run._write_progress = write_then_remove  # type: ignore[method-assign]

    async def drive() -> str | None:
        async with run:
            assert await run.preflight()
            await run.register()
            armed.append(True)
            _, _, reason = await run.hold(60)
            run.finish("completed" if reason is None else "failed", reason)
        return reason

    reason = asyncio.run(asyncio.wait_for(drive(), 90))
    assert len(armed) == 2  # it was removed
    assert reason is not None and "removed during the run" in reason
    assert run.result is not None and run.result.status == "failed"
    assert run.result.exit_code == 1 and "cannot write the run directory" in str(run.result.reason)
    status = json.loads((run.result.run_dir / "status.json").read_text())
    assert status["status"] == "failed" and status["abort_reason"] == run.result.reason
    assert status["actors_deleted"] == status["actors_created"] == 2
    manifest = json.loads((run.result.run_dir / "manifest.json").read_text())
    assert "removed during the run" in manifest["incomplete"]
    assert verify_manifest(run.result.run_dir) == []
