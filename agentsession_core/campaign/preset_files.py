"""Campaign presets: named CampaignParams files (deployments/presets/, packaged as
campaign/presets/ in the wheel)."""

from __future__ import annotations

from pathlib import Path

from agentsession_core.campaign.params import CampaignParams
from agentsession_core.engine.params import parse
from agentsession_core.engine.params_io import load_values
from agentsession_core.errors import UsageError

# Presets ship inside the wheel (pyproject force-include); a checkout keeps them in deployments/.
_PACKAGED_PRESETS = Path(__file__).resolve().parent / "presets"
PRESET_DIR = (
    _PACKAGED_PRESETS
    if _PACKAGED_PRESETS.is_dir()
    else Path(__file__).resolve().parents[2] / "deployments" / "presets"
)


def preset_names() -> list[str]:
    if not PRESET_DIR.is_dir():
        return []
    return sorted({p.stem for p in PRESET_DIR.iterdir() if p.suffix in (".yaml", ".yml")})


def preset_path(name: str) -> Path:
    for suffix in (".yaml", ".yml"):
        path = PRESET_DIR / f"{name}{suffix}"
        if path.is_file():
            return path
    raise UsageError(f"preset {name!r}: unknown (presets: {', '.join(preset_names()) or 'none'})")


def load_preset(name: str) -> CampaignParams:
    path = preset_path(name)
    return parse(CampaignParams, load_values(path), source=str(path))
