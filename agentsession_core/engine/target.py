"""The run's substrate: a client for `params.target` in the wire form it speaks (docs/SPEC.md
§2: HttpSubstrate for json, AteSubstrate for ate), and the embedded local substrate it talks to
when no URL is given (started with the run, stopped after its cleanup)."""

from __future__ import annotations

import contextlib
import logging
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path

from agentsession_core.engine.params import TargetParams
from agentsession_core.engine.worker_pools import split_workers
from agentsession_core.errors import UsageError
from agentsession_core.substrate.http import HttpSubstrate
from agentsession_core.substrate.interface import Substrate
from agentsession_core.substrate.router_tls import RouterTls
from local_substrate.launcher import LocalSubstrate

log = logging.getLogger("agentsession")


@contextlib.asynccontextmanager
async def local_substrate(target: TargetParams, log_path: Path) -> AsyncIterator[LocalSubstrate]:
    """An embedded local substrate for the run."""
    with tempfile.TemporaryDirectory(prefix="agentsession-store-") as store:
        # One pool per entry, local_workers split by weight (docs/SPEC.md §2.6).
        pools = split_workers(target.local_workers, target.worker_pools or {}) or None
        local = LocalSubstrate(
            workers=target.local_workers,
            pools=pools,
            worker_capacity=target.local_worker_capacity,
            worker_memory=target.local_worker_memory,
            store=store,
            token=target.token,
            log_path=log_path,
            start_timeout=target.local_start_timeout_seconds,
            data_plane=target.local_data_plane,
        )
        async with local:
            shown = ", ".join(f"{name}={n}" for name, n in (pools or {}).items())
            log.info(
                "local substrate on %s (%d workers%s, %d actors each%s)",
                local.url,
                target.local_workers,
                f" in pools {shown}" if shown else "",
                target.local_worker_capacity,
                "" if target.local_data_plane else ", no data plane",
            )
            yield local


def local_endpoints(local: LocalSubstrate, target: TargetParams) -> tuple[str, str | None]:
    """(control URL, router URL) of the embedded substrate in the target's wire form. The local
    substrate serves both forms over the same actors (docs/SPEC.md §2): the JSON control API
    and the router on its HTTP URL, ateapi.Control on its gRPC one."""
    if target.wire == "json":
        return local.url, None
    grpc_url = getattr(local, "grpc_url", None)
    if not grpc_url:
        raise UsageError(
            "target.protocol ate: this local substrate serves no ateapi.Control endpoint; "
            "use protocol json, or give substrate (grpc://…) and router URLs"
        )
    return str(grpc_url), local.url


def router_tls(target: TargetParams) -> RouterTls | None:
    """The https:// router's TLS settings (docs/SPEC.md §2.2); None for an http:// one."""
    if not (target.router or target.substrate or "").startswith("https://"):
        return None
    return RouterTls(
        ca_file=target.router_ca_file,
        cert_file=target.router_cert_file,
        key_file=target.router_key_file,
        server_name=target.router_server_name,
    )


def client_for(target: TargetParams, control: str, router: str | None) -> Substrate:
    """The Substrate client for `target`'s wire form at these URLs."""
    timeout = target.request_timeout_seconds
    if target.wire == "json":
        return HttpSubstrate(
            control,
            router,
            token=target.token,
            control_timeout=timeout,
            router_timeout=timeout,
            max_answer_bytes=target.max_answer_bytes,
            router_tls=router_tls(target),
        )
    # Imported here: only ate runs pay for loading gRPC.
    from agentsession_core.substrate.ate.substrate import AteSubstrate

    if router is None:  # TargetParams requires it with a grpc(s):// URL
        raise UsageError("target.router: required with the ate wire")
    return AteSubstrate(
        control,
        router,
        token=target.token,
        token_file=target.token_file,
        ca_file=target.ca_file,
        cert_file=target.cert_file,
        key_file=target.key_file,
        server_name=target.server_name or None,
        control_timeout=timeout,
        router_timeout=timeout,
        max_answer_bytes=target.max_answer_bytes,
        router_tls=router_tls(target),
    )


@contextlib.asynccontextmanager
async def open_substrate(target: TargetParams, log_path: Path) -> AsyncIterator[Substrate]:
    """The client for `target`: its URLs, or a local substrate started here (its log goes to
    `log_path`). Closed, and the local substrate stopped, on the way out."""
    async with contextlib.AsyncExitStack() as stack:
        if target.substrate:
            control, router = target.substrate, target.router
        else:
            local = await stack.enter_async_context(local_substrate(target, log_path))
            control, router = local_endpoints(local, target)
        substrate = client_for(target, control, router)
        stack.push_async_callback(substrate.aclose)
        yield substrate
