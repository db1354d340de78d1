"""The committed reference pages are what docs/gen/references.py renders from the code now, and
what the code declares reaches them with no hand edit."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

from pydantic import Field

from agentsession_core.campaign.params import CampaignParams
from agentsession_core.engine.params import RunParams, Seconds

REPO = Path(__file__).resolve().parents[2]


def generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "docs_references", REPO / "docs/gen/references.py"
    )
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("docs_references", module)
    spec.loader.exec_module(module)
    return module


def test_every_generated_page_is_current() -> None:
    stale = generator().stale()
    assert not stale, (
        f"generated documentation is stale: {', '.join('docs/' + p for p in stale)}; run "
        "`python docs/gen/references.py` and commit the result"
    )


def test_a_field_added_to_runparams_appears_in_the_reference() -> None:
    class WiderRun(RunParams):
        probe_seconds: Seconds = Field(5.0, ge=1, le=9, description="how long a probe waits")

    class WiderCampaign(CampaignParams, WiderRun):
        pass

    gen = generator()
    page = gen.parameters_page(WiderRun, WiderCampaign)
    row = (
        "| `probe_seconds`<br>`--probe-seconds` | seconds or a duration (`2s`, `10m`) | `5` | "
        "≥ 1, ≤ 9 | how long a probe waits |"
    )
    assert row in page
    # The committed page lacks it, so the staleness test would fail until regenerated.
    assert row not in (REPO / "docs/reference/parameters.md").read_text(encoding="utf-8")


def test_campaign_defaults_that_differ_are_marked() -> None:
    page = generator().parameters_page()
    assert "| `population.kind`<br>`--population` |" in page
    assert "run: `closed`<br>**campaign: `turnover`**" in page
    assert "| `dest` | text or none | none (*campaign only*) |" in page


def test_check_mode_names_a_stale_page(tmp_path: Path) -> None:
    gen = generator()
    pages = gen.render()
    for path, text in pages.items():
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text(text, encoding="utf-8")
    assert gen.stale(tmp_path) == []
    (tmp_path / "reference/cli.md").write_text("edited by hand\n", encoding="utf-8")
    assert gen.stale(tmp_path) == ["reference/cli.md"]
