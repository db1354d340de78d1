"""Serve the deployments of deployments/prefect.yaml from one box, no work pool needed:
`nightly`, `adhoc` and `verdict-report` (run by its trigger when a verdict is fail).

    PREFECT_API_URL=http://127.0.0.1:4200/api python -m flows.serve   # or: agentsession serve

Needs a running Prefect API (`prefect server start --analytics-off`). The nightly schedule,
the deployments' parameters and triggers come from deployments/prefect.yaml, so `prefect
deploy` and this process agree; one flow run at a time (two campaigns would measure each
other; a report waits for the campaign in progress).
Stopping the process pauses the nightly schedule (Prefect's serve default).
"""

from __future__ import annotations

import importlib
import os
from pathlib import Path
from typing import Any

import yaml

# A checkout keeps prefect.yaml in deployments/; the wheel ships a copy inside flows/.
_CHECKOUT_YAML = Path(__file__).resolve().parents[1] / "deployments" / "prefect.yaml"
_PACKAGED_YAML = Path(__file__).parent / "prefect.yaml"
PREFECT_YAML = _CHECKOUT_YAML if _CHECKOUT_YAML.is_file() else _PACKAGED_YAML


def deployment_specs(path: Path = PREFECT_YAML) -> dict[str, dict[str, Any]]:
    """prefect.yaml's deployments by name."""
    document = yaml.safe_load(path.read_text(encoding="utf-8"))
    return {spec["name"]: spec for spec in document.get("deployments") or []}


def entrypoint_flow(entrypoint: str) -> Any:
    """The flow a module-path entrypoint (`flows.campaign.campaign`) names."""
    module, _, attr = entrypoint.rpartition(".")
    return getattr(importlib.import_module(module), attr)


def deployment_triggers(name: str, spec: dict[str, Any]) -> list[Any]:
    """A deployment's `triggers:` as Prefect's models, named as `prefect deploy` names them."""
    from prefect.events.schemas.deployment_triggers import DeploymentTriggerTypes
    from pydantic import TypeAdapter

    adapter: TypeAdapter[Any] = TypeAdapter(DeploymentTriggerTypes)
    return [
        adapter.validate_python({"name": f"{name}__automation_{i}", **trigger})
        for i, trigger in enumerate(spec.get("triggers") or [], start=1)
    ]


def build_deployments(cron: str | None = None, path: Path = PREFECT_YAML) -> list[Any]:
    """RunnerDeployments for serve(); builds without talking to an API."""
    from prefect.client.schemas.objects import ConcurrencyLimitConfig
    from prefect.schedules import Cron

    out = []
    for name, spec in deployment_specs(path).items():
        schedules = [
            Cron(cron or s["cron"], timezone=s.get("timezone", "UTC"), slug=s.get("slug"))
            for s in spec.get("schedules") or []
        ]
        limit = spec.get("concurrency_limit") or {}
        out.append(
            entrypoint_flow(spec["entrypoint"]).to_deployment(
                name=name,
                description=spec.get("description"),
                tags=spec.get("tags"),
                schedules=schedules or None,
                parameters=spec.get("parameters") or {},
                concurrency_limit=ConcurrencyLimitConfig(**limit) if limit else None,
                triggers=deployment_triggers(name, spec) or None,
            )
        )
    return out


def serve_deployments(cron: str | None = None) -> None:
    from prefect import serve

    serve(*build_deployments(cron), limit=1)


if __name__ == "__main__":
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    os.environ.setdefault("DO_NOT_TRACK", "1")
    serve_deployments(os.environ.get("AGENTSESSION_NIGHTLY_CRON"))
