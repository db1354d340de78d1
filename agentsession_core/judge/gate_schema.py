"""Where GateInputError was declared before gate.json's validation moved into its model
(judge/gate_document.py): kept only for campaign/campaign.py's import, which is being
rewritten with the Run lifecycle (issue 35); delete this file once it imports
judge/gate_document.py."""

from agentsession_core.judge.gate_document import GateInputError

__all__ = ["GateInputError"]
