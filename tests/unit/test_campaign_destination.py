"""Where a campaign's run ends up: written to `out`; without `dest` (or with a local one) it
stays there; with an s3:// `dest` it is uploaded under the same layout. Campaign.location and
the upload task agree."""

from __future__ import annotations

import asyncio
from pathlib import Path
from types import SimpleNamespace

from agentsession_core.campaign.campaign import Campaign
from agentsession_core.campaign.params import CampaignParams
from agentsession_core.engine.params import parse
from agentsession_core.output.run_dir import RunDir

STARTED = 1_790_000_000.0


def _campaign(params: CampaignParams) -> tuple[Campaign, Path]:
    run_dir = RunDir.create(params.out, params.name, params.tag, STARTED)
    run_dir.write_text("logs.txt", "line\n")
    run_dir.write_manifest()
    run = SimpleNamespace(finalizers=[], run_dir=run_dir, params=params)
    return Campaign(params, run, baseline=None), run_dir.path  # type: ignore[arg-type]


def _upload(run_dir: Path, params: CampaignParams):  # type: ignore[no-untyped-def]
    from tasks.upload import upload

    return asyncio.run(upload.fn(run_dir, params))


def test_without_dest_the_run_stays_in_out(tmp_path: Path) -> None:
    params = parse(CampaignParams, {"out": str(tmp_path / "art"), "script": "smoke"})
    campaign, run_dir = _campaign(params)
    assert run_dir.is_relative_to(tmp_path / "art")
    assert campaign.location == str(run_dir)
    result = _upload(run_dir, params)
    assert result.ok and result.location == campaign.location == result.local_dir


def test_a_local_dest_is_written_directly(tmp_path: Path) -> None:
    params = parse(CampaignParams, {"dest": f"file://{tmp_path / 'art'}", "script": "smoke"})
    campaign, run_dir = _campaign(params)
    assert run_dir.is_relative_to(tmp_path / "art")
    result = _upload(run_dir, params)
    assert result.ok and result.location == campaign.location == str(run_dir)


def test_an_s3_dest_keeps_the_layout_under_out(tmp_path: Path) -> None:
    params = parse(
        CampaignParams,
        {"dest": "s3://bench/nightly", "out": str(tmp_path / "local"), "script": "smoke"},
    )
    campaign, run_dir = _campaign(params)
    relative = run_dir.relative_to(tmp_path / "local").as_posix()
    assert campaign.location == f"s3://bench/nightly/{relative}"
