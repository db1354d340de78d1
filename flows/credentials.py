"""Where the campaign flow's bearer token comes from (docs/SPEC.md §6, "Credentials").

A flow run's parameters are stored in Prefect's database, shown in its UI and printed by
`prefect flow-run inspect`, so the token is never one of them: the flow refuses a
`target.token` parameter, in one line, before anything starts. When it starts it takes
the token from, in this order:

1. the Prefect Secret block named by `target.token_secret` (loaded from the flow run's
   Prefect API; the block's value is write-only in the UI);
2. `target.token_file` (the ate wire's client reads the file itself, on every call);
3. AGENTSESSION_TOKEN in the flow-run process's environment: a worker's or `agentsession
   serve`'s environment reaches the flow runs it starts, and `agentsession campaign` puts a
   token from a `--params` file or preset there for the flow it runs in-process.

A parameter that names a credential (1 or 2) wins over the environment, as a flag wins over
AGENTSESSION_TOKEN for `agentsession run`. The resolved token lives only in the in-memory
parameters the engine runs with; campaign.json redacts it like every credential.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from typing import Any, cast

from agentsession_core.campaign.params import CampaignParams, CampaignTargetParams
from agentsession_core.errors import UsageError

TOKEN_ENV = "AGENTSESSION_TOKEN"
TOKEN_PARAMETER_REFUSED = (
    "target.token: a token given as a flow parameter is stored in Prefect's database; name "
    "a Prefect Secret block with target.token_secret, or set AGENTSESSION_TOKEN where the "
    "flow runs"
)
# Prefect's message when no block document has the name (prefect/blocks/core.py).
_NOT_FOUND = "Unable to find block document"


def without_token(params: CampaignParams) -> tuple[CampaignParams, str | None]:
    """(the parameters the flow may be given, the token they held): for `agentsession
    campaign`, which hands the token to its in-process flow through the environment."""
    token = params.target.token
    if not token:
        return params, None
    target = params.target.model_copy(update={"token": None})
    return params.model_copy(update={"target": target}), token


@contextlib.contextmanager
def token_in_environment(token: str | None) -> Iterator[None]:
    """AGENTSESSION_TOKEN set to `token` while the in-process flow runs (unchanged when None),
    as it was afterwards, so a caller that runs the command in-process keeps its own."""
    if token is None:
        yield
        return
    saved = os.environ.get(TOKEN_ENV)
    os.environ[TOKEN_ENV] = token
    try:
        yield
    finally:
        if saved is None:
            os.environ.pop(TOKEN_ENV, None)
        else:
            os.environ[TOKEN_ENV] = saved


async def with_token(params: CampaignParams) -> CampaignParams:
    """The parameters the engine runs with: the flow's own plus the token from the Secret
    block or the environment, for the target and for a paired campaign's reference arm
    alike. UsageError (one line) for a token given as a parameter, a block that cannot be
    loaded or holds no token."""
    update: dict[str, Any] = {"target": await _resolved(params.target, "target")}
    if params.reference is not None:
        update["reference"] = await _resolved(params.reference, "reference")
    # model_copy skips validation on purpose: token beside token_secret is refused as input
    # (one source of credentials), but here it is the block's value, resolved.
    return params.model_copy(update=update)


async def _resolved(target: CampaignTargetParams, where: str) -> CampaignTargetParams:
    if target.token:
        raise UsageError(TOKEN_PARAMETER_REFUSED.replace("target.", f"{where}."))
    if target.token_secret:
        token: str | None = await _secret_token(target.token_secret, where)
    elif target.token_file:
        return target  # read by the ate client itself, on every call
    else:
        token = os.environ.get(TOKEN_ENV, "").strip() or None
        if token is None:
            return target
    return target.model_copy(update={"token": token})


async def _secret_token(name: str, where: str) -> str:
    # Imported here: `agentsession campaign` imports this module before it configures Prefect.
    from prefect.blocks.system import Secret

    try:
        # Prefect's async_dispatch leaves aload's return type unresolved for mypy.
        block = cast("Secret[Any]", await Secret.aload(name))
    except ValueError as exc:
        if _NOT_FOUND in str(exc):
            raise UsageError(
                f"{where}.token_secret: no Prefect Secret block named {name!r} on this Prefect "
                "API (create one under Blocks in the UI)"
            ) from None
        # Not the message: a validation error would quote the block's (secret) value.
        raise UsageError(
            f"{where}.token_secret: the Secret block {name!r} could not be loaded "
            f"({type(exc).__name__})"
        ) from None
    value = block.value.get_secret_value()
    if not isinstance(value, str) or not value.strip():
        raise UsageError(f"{where}.token_secret: the Secret block {name!r} holds no token text")
    return value.strip()
