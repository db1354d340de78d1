"""A campaign in a process of its own, as `agentsession campaign` runs one but without
Prefect: `python -m tests.integration.campaign_process PARAMS.json` runs the campaign the file
describes (CampaignParams as JSON) and prints its run directory last. A test can then do to
that process what happens to a real generator: stop it (SIGSTOP) for a while, as a machine
too busy to schedule it would."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from agentsession_core.campaign.params import CampaignParams
from agentsession_core.campaign.standalone import run_campaign_blocking
from agentsession_core.logs import log_to_stderr


def main(path: str) -> int:
    log_to_stderr()
    params = CampaignParams.model_validate(json.loads(Path(path).read_text()))
    result = run_campaign_blocking(params)
    print(result.run_dir, flush=True)
    return result.exit_code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
