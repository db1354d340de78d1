"""agentsession: replay scripted agent sessions against an actor substrate and measure them.

The public Python API, in a few lines (docs/how-to/python.md runs this):

    import agentsession_core as ag

    ag.log_to_stderr()
    pop = {"sessions": 12, "awake": 4, "target_rps": 2, "registration_quiet_seconds": "1s"}
    params = ag.CampaignParams(script="smoke", hold_minutes=0.25, window_seconds=15, population=pop)
    result = ag.run_campaign_blocking(params)  # embedded local substrate, judged windows
    print(result.verdict, result.run_dir)

Every name below is imported on first use, so `import agentsession_core` stays cheap and a
tool that needs only scripts does not pay for the engine, numpy or aiohttp.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

from agentsession_core.version import __version__

# name -> the module that defines it
_PUBLIC = {
    # parameters
    "RunParams": "agentsession_core.engine.params",
    "TargetParams": "agentsession_core.engine.params",
    "PopulationParams": "agentsession_core.engine.params",
    "CampaignParams": "agentsession_core.campaign.params",
    "load_preset": "agentsession_core.campaign.preset_files",
    # one run, phase by phase or whole
    "Run": "agentsession_core.run.run",
    "RunResult": "agentsession_core.run.run",
    "run": "agentsession_core.run.single",
    "run_blocking": "agentsession_core.run.single",
    # a judged campaign without Prefect
    "Campaign": "agentsession_core.campaign.campaign",
    "CampaignResult": "agentsession_core.campaign.standalone",
    "run_campaign": "agentsession_core.campaign.standalone",
    "run_campaign_blocking": "agentsession_core.campaign.standalone",
    "load_run": "agentsession_core.judge.stored_run",
    "StoredRun": "agentsession_core.judge.stored_run",
    # scripts
    "Script": "agentsession_core.script",
    "ScriptError": "agentsession_core.script",
    "load_script": "agentsession_core.script",
    # substrates
    "Substrate": "agentsession_core.substrate.interface",
    "Template": "agentsession_core.substrate.interface",
    "ActorInfo": "agentsession_core.substrate.interface",
    "RouterResponse": "agentsession_core.substrate.interface",
    "SubstrateError": "agentsession_core.substrate.errors",
    "HttpSubstrate": "agentsession_core.substrate.http",
    "AteSubstrate": "agentsession_core.substrate.ate.substrate",
    "FakeSubstrate": "agentsession_core.substrate.fake",
    "LocalSubstrate": "local_substrate.launcher",
    # errors and logging
    "AgentsessionError": "agentsession_core.errors",
    "UsageError": "agentsession_core.errors",
    "log_to_stderr": "agentsession_core.logs",
}

# Listed out, not derived from _PUBLIC, so linters and IDEs see the names (a test keeps
# the two equal).
__all__ = [
    "ActorInfo",
    "AgentsessionError",
    "AteSubstrate",
    "Campaign",
    "CampaignParams",
    "CampaignResult",
    "FakeSubstrate",
    "HttpSubstrate",
    "LocalSubstrate",
    "PopulationParams",
    "RouterResponse",
    "Run",
    "RunParams",
    "RunResult",
    "Script",
    "ScriptError",
    "StoredRun",
    "Substrate",
    "SubstrateError",
    "TargetParams",
    "Template",
    "UsageError",
    "__version__",
    "load_preset",
    "load_run",
    "load_script",
    "log_to_stderr",
    "run",
    "run_blocking",
    "run_campaign",
    "run_campaign_blocking",
]

if TYPE_CHECKING:
    from agentsession_core.campaign.campaign import Campaign
    from agentsession_core.campaign.params import CampaignParams
    from agentsession_core.campaign.preset_files import load_preset
    from agentsession_core.campaign.standalone import (
        CampaignResult,
        run_campaign,
        run_campaign_blocking,
    )
    from agentsession_core.engine.params import PopulationParams, RunParams, TargetParams
    from agentsession_core.errors import AgentsessionError, UsageError
    from agentsession_core.judge.stored_run import StoredRun, load_run
    from agentsession_core.logs import log_to_stderr
    from agentsession_core.run.run import Run, RunResult
    from agentsession_core.run.single import run, run_blocking
    from agentsession_core.script import Script, ScriptError, load_script
    from agentsession_core.substrate.ate.substrate import AteSubstrate
    from agentsession_core.substrate.errors import SubstrateError
    from agentsession_core.substrate.fake import FakeSubstrate
    from agentsession_core.substrate.http import HttpSubstrate
    from agentsession_core.substrate.interface import (
        ActorInfo,
        RouterResponse,
        Substrate,
        Template,
    )
    from local_substrate.launcher import LocalSubstrate


def __getattr__(name: str) -> Any:
    module = _PUBLIC.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(module), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
