"""PopulationParams: the settings every population kind shares (docs/SPEC.md §4).

Each kind's model derives from it beside its code (closed_params.py, turnover_params.py,
turns_params.py, spawn_params.py, burst_params.py, cold_resume_params.py) with only the
fields that kind reads; engine/population_params.py joins them into one union on `kind`.
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal, get_args, get_origin

from pydantic import Field, model_validator
from pydantic_core import PydanticCustomError

from agentsession_core.engine.param_types import (
    MAX_RATE,
    MAX_SESSIONS,
    MAX_WAIT_S,
    Flag,
    LifecycleMode,
    Number,
    OptionalSeconds,
    PopulationKind,
    ResumeMode,
    Seconds,
    Section,
    WakeProbe,
)

# The error type of a population field refused (another kind's, or the kind itself unknown):
# its context names the field, which describe() (engine/params.py) adds to the path.
POPULATION_FIELD = "population_field"


def _possessive(kind: str) -> str:
    return f"{kind}'" if kind.endswith("s") else f"{kind}'s"


class PopulationParams(Section):
    """Who wakes when (docs/SPEC.md §4): the fields every kind has.

    `PopulationParams(kind=..., ...)` builds the kind's own model (a TurnoverParams for
    `kind="turnover"`), so a field of another kind is refused there too."""

    kind: Annotated[PopulationKind, Flag("--population")] = Field(
        "closed", description="population"
    )
    sessions: int = Field(10, ge=1, le=MAX_SESSIONS, description="sessions registered")
    spawn_rate: Number = Field(10.0, gt=0, le=MAX_RATE, description="sessions started per second")
    registration_quiet_seconds: Annotated[
        Seconds, Flag("--registration-quiet-seconds", "--registration-quiet")
    ] = Field(
        60.0, ge=0, le=MAX_WAIT_S, description="registration ends after this long without a start"
    )
    registration_deadline_seconds: OptionalSeconds = Field(
        None,
        gt=0,
        description="registration gives up (the run fails) after this long "
        "(default: sessions / spawn_rate x 2 + 60 s)",
    )
    resume_mode: ResumeMode = Field("implicit", description="explicit: ResumeActor before a wake")
    park_check_share: Number = Field(
        0.01,
        ge=0,
        le=1,
        description="implicit resume: the share of parks read back with GetActor (off the "
        "wake path, seeded) to find suspends that did not happen (NOT_SUSPENDED); 0: none",
    )
    wake_probe: WakeProbe = Field(
        "ping",
        description="ping: a wake ends at the first router request's answer; none: at "
        "ResumeActor's answer, and no request goes through the router (no first touch, no "
        "step): the control plane alone (needs resume_mode explicit)",
    )
    lifecycle_mode: LifecycleMode = Field("suspend", description="how an actor is parked")

    # Every kind's model, by kind, in PopulationKind's order (each registers itself).
    kinds: ClassVar[dict[str, type[PopulationParams]]] = {}

    @classmethod
    def __pydantic_init_subclass__(cls, **kwargs: Any) -> None:
        super().__pydantic_init_subclass__(**kwargs)
        kind = cls.model_fields["kind"].annotation
        if get_origin(kind) is Literal and len(get_args(kind)) == 1:  # a kind's own model
            table = {**PopulationParams.kinds, get_args(kind)[0]: cls}
            order = get_args(PopulationKind)
            PopulationParams.kinds = {k: table[k] for k in order if k in table}

    def __new__(cls, *args: Any, **values: Any) -> Any:
        if cls is PopulationParams:  # the public name builds the kind's own model
            return cls.of(values)
        return super().__new__(cls)

    @classmethod
    def of(cls, values: dict[str, Any]) -> PopulationParams:
        """The kind's own model built from `values` (`kind` left out: closed)."""
        kind = values.get("kind", "closed")
        if kind not in cls.kinds:
            raise unknown_kind(kind)
        return cls.kinds[kind].model_validate(values)

    @model_validator(mode="before")
    @classmethod
    def _own_fields(cls, values: Any) -> Any:
        """A field of another kind is refused naming the field and the kind (a key no kind
        has is left to extra="forbid")."""
        if not isinstance(values, dict):
            return values
        kind = values.get("kind", cls.model_fields["kind"].default)
        for field in values:
            theirs = owners(field)
            if field not in cls.model_fields and theirs:
                raise PydanticCustomError(
                    POPULATION_FIELD,
                    "{kind} has no {field} (it is {owners})",
                    {
                        "kind": kind,
                        "field": field,
                        "owners": ", ".join(_possessive(k) for k in theirs),
                    },
                )
        return values

    @model_validator(mode="after")
    def _probe(self) -> PopulationParams:
        """What wake_probe none cannot do: every scripted op, and a first touch, goes through
        the router it leaves alone (docs/SPEC.md §3)."""
        if self.wake_probe == "ping":
            return self
        if self.resume_mode != "explicit":
            raise ValueError(
                "population.wake_probe none: the wake is ResumeActor alone; set "
                "population.resume_mode explicit (implicit wakes by a router request)"
            )
        if self.lifecycle_mode == "none":
            raise ValueError(
                "population.wake_probe none: lifecycle_mode none parks nothing, so nothing "
                "is ever resumed (use suspend, suspend-async or pause)"
            )
        return self

    def parks_required(self) -> None:
        """For a kind that resumes parked actors: lifecycle_mode none is refused."""
        if self.lifecycle_mode == "none":
            raise ValueError(
                f"population.kind {self.kind} resumes parked actors and parks them again: "
                "lifecycle_mode none parks nothing (use suspend, suspend-async or pause)"
            )

    @property
    def level(self) -> float:
        """The population's load level (docs/SPEC.md §4.4) at 1×: its sessions, unless its
        kind has a rate."""
        return float(self.sessions)

    @property
    def cohorts(self) -> bool:
        """Whether the population measures cohorts (spawn, burst: docs/SPEC.md §4.5, §4.6)."""
        return False

    def fill_deadline(self) -> float:
        """Seconds the fill phase may take (docs/SPEC.md §4.2): a kind with no resident set
        to fill has a minute (a turnover's own rule is in turnover_params.py)."""
        return 60.0

    def registration_deadline(self, sessions: int | None = None) -> float:
        """Seconds registration (of `sessions`, default all) may take (docs/SPEC.md §4):
        twice the spawn ramp plus a minute for the last sessions' first touch and step 1."""
        if self.registration_deadline_seconds is not None:
            return self.registration_deadline_seconds
        count = self.sessions if sessions is None else sessions
        return count / self.spawn_rate * 2.0 + 60.0


def owners(field: str) -> list[str]:
    """The kinds whose model has `field`, in PopulationKind's order."""
    return [kind for kind, model in PopulationParams.kinds.items() if field in model.model_fields]


def unknown_kind(kind: Any) -> PydanticCustomError:
    return PydanticCustomError(
        POPULATION_FIELD,
        "{given} is not a population kind ({kinds})",
        {"field": "kind", "given": repr(kind), "kinds": ", ".join(PopulationParams.kinds)},
    )
