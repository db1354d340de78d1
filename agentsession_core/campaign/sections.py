"""The sections of a campaign's parameters beside the engine's (campaign/params.py): the
target with its credential source, the population's campaign defaults (a table applied
before validation, not a model of their own), the abort rules, the gate's comparison, and
the upload.
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import Field, ValidationInfo, field_validator

from agentsession_core.campaign.bounds import MAX_ABORT_DELAY_S, MAX_RETRY_DELAY_S, MAX_RULES
from agentsession_core.campaign.rules import DEFAULT_ABORT_RULES, AbortRules, parse_rules
from agentsession_core.engine.params import (
    MAX_TEXT,
    MAX_WAIT_S,
    Number,
    Seconds,
    Section,
    TargetParams,
)
from agentsession_core.engine.population_params import KIND_PARAMS, AnyPopulation, population_of
from agentsession_core.errors import clip
from agentsession_core.judge.compare import DEFAULT_HISTORY, DEFAULT_NIGHT_SPREAD, MAX_HISTORY
from agentsession_core.judge.decision import DEFAULT_PAIRED_RULE, DEFAULT_RULE, DecisionRule
from agentsession_core.judge.false_discovery import DEFAULT_METHOD, Method
from agentsession_core.judge.paired import (
    DEFAULT_BLOCK_SECONDS,
    DEFAULT_MIN_BLOCKS,
    PAIRED_MIN_BEYOND,
)
from agentsession_core.judge.uncertainty import DEFAULT_CONFIDENCE

# Prefect's own rule for a block document's name: refused here, in one line, rather than
# found when the flow looks the block up.
_BLOCK_NAME = re.compile(r"^[a-z0-9-]+$")
MAX_BLOCK_NAME = 255


class CampaignTargetParams(TargetParams):
    """TargetParams with the campaign's own credential source, a Prefect Secret block.

    A flow run's parameters are stored in Prefect's database and shown in its UI, so the
    campaign flow refuses `token` as a parameter; it takes the token when it starts from the
    block named here, from `token_file`, or from AGENTSESSION_TOKEN in its environment
    (flows/credentials.py, docs/SPEC.md §6 "Credentials"). Only the flow reads the block:
    agentsession_core never imports Prefect."""

    # Redeclared for its description, which the flow's form shows.
    token: str | None = Field(
        None,
        max_length=MAX_TEXT,
        description="bearer token; the campaign flow refuses it as a parameter (Prefect stores "
        "parameters): use token_secret, or AGENTSESSION_TOKEN where the flow runs",
    )
    token_secret: str | None = Field(
        None,
        max_length=MAX_BLOCK_NAME,
        description="campaign flow: name of the Prefect Secret block holding the bearer token, "
        "read when the flow starts (a token given as a flow parameter is refused: Prefect "
        "stores parameters; or set AGENTSESSION_TOKEN where the flow runs)",
    )

    @field_validator("token_secret")
    @classmethod
    def _token_secret(cls, value: str | None, info: ValidationInfo) -> str | None:
        if not value:
            return None
        if info.data.get("token") or info.data.get("token_file"):
            raise ValueError("give one of token, token_file and token_secret")
        if not _BLOCK_NAME.match(value):
            raise ValueError(
                f"{clip(value)} is not a Prefect block name (lowercase letters, digits, dashes)"
            )
        return value


# The campaign's population defaults (`agentsession run`'s are each kind's model's own): a
# turnover of 1000 sessions, 100 awake, 5 swaps/s. Applied to the values before they are
# validated, each field only where the chosen kind has it and the caller left it out.
CAMPAIGN_POPULATION: dict[str, Any] = {
    "kind": "turnover",
    "sessions": 1000,
    "awake": 100,
    "target_rps": 5.0,
}


def with_campaign_defaults(population: Any) -> Any:
    """`population` as given (a mapping), with the campaign's defaults its kind has filled in;
    a model already built passes on."""
    if population is None:
        population = {}
    if not isinstance(population, dict):
        return population
    kind = population.get("kind", CAMPAIGN_POPULATION["kind"])
    model = KIND_PARAMS.get(kind) if isinstance(kind, str) else None
    if model is None:
        return population  # the model names the kinds
    defaults = {
        name: value
        for name, value in CAMPAIGN_POPULATION.items()
        if name in model.model_fields and name not in population
    }
    return {**defaults, **population}


def campaign_population() -> AnyPopulation:
    """The campaign's default population, built."""
    return population_of(with_campaign_defaults({}))


class AbortParams(Section):
    """Rules checked every second on a sliding window; a trip ends the campaign at once."""

    rules: AbortRules = Field(
        default_factory=lambda: parse_rules(DEFAULT_ABORT_RULES, "abort.rules", abort=True),
        max_length=MAX_RULES,
        description="threshold expressions that abort when missed",
    )
    sliding_seconds: Seconds = Field(
        30.0, gt=0, le=MAX_WAIT_S, description="window the rules are judged on"
    )
    delay_seconds: Seconds = Field(
        60.0, ge=0, le=MAX_ABORT_DELAY_S, description="warm-up before rules are checked"
    )


class GateParams(Section):
    """How the gate compares this run with a baseline (docs/SPEC.md §6.3)."""

    confidence: Number = Field(
        DEFAULT_CONFIDENCE,
        gt=0.5,
        lt=1,
        description="of every figure's interval and of a regression (0.99 = 99 %)",
    )
    history: int = Field(
        DEFAULT_HISTORY, ge=1, le=MAX_HISTORY, description="earlier runs `baseline: auto` reads"
    )
    night_spread: Number = Field(
        DEFAULT_NIGHT_SPREAD,
        ge=0,
        le=5,
        description="run-to-run spread (sd of log figure) assumed for a single-run baseline "
        "with no history of at least 3 runs to measure it over",
    )
    rule: DecisionRule = Field(
        DEFAULT_RULE,
        description="against a baseline: when a change is a regression: whole-interval (the "
        "whole interval beyond max_regression), significant (the interval excludes no change "
        "and the estimate exceeds max_regression) or margin-test (a one-sided test at "
        "max_regression)",
    )
    false_discovery: Method = Field(
        DEFAULT_METHOD,
        description="how the figures one comparison judges are controlled together: bh "
        "(Benjamini-Hochberg), by (Benjamini-Yekutieli, under any dependence) or none (each "
        "figure alone at the confidence)",
    )
    paired_rule: DecisionRule = Field(
        DEFAULT_PAIRED_RULE,
        description="a paired campaign: when the candidate regressed against its reference "
        "arm (the same rules as rule)",
    )
    block_seconds: int = Field(
        DEFAULT_BLOCK_SECONDS,
        ge=1,
        le=3600,
        description="a paired campaign: seconds per paired block of the hold (a block the "
        "generator saturated in is dropped from both arms)",
    )
    min_blocks: int = Field(
        DEFAULT_MIN_BLOCKS,
        ge=2,
        le=1_000_000,
        description="a paired campaign: fewest paired blocks left to judge; fewer: void",
    )
    min_beyond: int = Field(
        PAIRED_MIN_BEYOND,
        ge=1,
        le=1_000_000,
        description="a paired campaign: samples past a percentile each arm needs for it to "
        "be compared (fewer: inconclusive)",
    )


class UploadParams(Section):
    """How artifacts reach `dest` when it is s3:// (the AWS chain supplies credentials)."""

    endpoint_url: str | None = Field(
        None,
        max_length=MAX_TEXT,
        description="S3-compatible endpoint (default: AWS_ENDPOINT_URL or AWS)",
    )
    region: str | None = Field(None, description="default: the AWS chain's region")
    attempts: int = Field(3, ge=1, le=10, description="upload attempts before giving up")
    retry_delay_seconds: Seconds = Field(
        2.0, ge=0, le=MAX_RETRY_DELAY_S, description="first retry delay (doubles)"
    )
