"""Start a local substrate as a subprocess (`python -m local_substrate serve --port 0 ...`,
the same as `agentsession substrate serve`), for the engine when no substrate URL is given
and for tests. The client side reaches the local substrate through this module only (and
its metric names, metric_names.py): the layering contract in pyproject.toml says so.

    async with LocalSubstrate(workers=4, store=tmp) as sub:
        sub.url        # http://127.0.0.1:PORT: the JSON control API and the router
        sub.grpc_url   # grpc://127.0.0.1:PORT (grpcs:// with TLS): ateapi.Control

    with LocalSubstrateProcess(pools={"fast": 2, "slow": 2}) as sub:  # worker pools

    with LocalSubstrateProcess(workers=1, worker_capacity=4, worker_memory="512Mi") as sub:
        ...  # one worker process holding up to four actors in 512 MiB (docs/SPEC.md §2.7)

    with LocalSubstrateProcess(workers=4, faults=["wake:refuse:0.2"]) as sub:  # non-async
        sub.set_faults(["router:latency:exp:50ms"])   # PUT /v1/debug/faults, while it runs

The child prints two lines (server.serve_forever): `... serving on http://...` and
`... ate control (gRPC) on grpc://...` (or `... off`), and between them, with a TLS router
port (router_tls_cert/key), `... router (TLS) on https://...` (`tls_url`); all are read,
then stderr goes to
`log_path` (or is discarded). The token reaches the child in its environment (TOKEN_ENV),
never on its command line, which any local user can read. Exit sends SIGTERM and waits
`stop_timeout`, then kills.

The child is started `--embedded`, its stdin a pipe only this process holds: if this process
dies without stopping it (even by SIGKILL), the child sees the pipe close, stops, and deletes
its actors and store (lifeline.py, persist.py), so nothing outlives the run that embedded it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import select
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from agentsession_core.substrate.protocol import DEBUG_FAULTS_PATH, DEBUG_WORKERS_PATH, TOKEN_ENV

# The parameter an embedded substrate's start timeout comes from (engine/target.py).
START_TIMEOUT_SETTING = "target.local_start_timeout_seconds"
_URL = re.compile(r"serving on (http://\S+)")
_GRPC = re.compile(r"ate control \(gRPC\) (?:on (grpcs?://\S+)|off)")
_TLS_ROUTER = re.compile(r"router \(TLS\) on (https://\S+)")


class LocalSubstrateProcess:
    """The substrate subprocess, managed from synchronous code."""

    def __init__(
        self,
        *,
        workers: int = 4,
        pools: dict[str, int] | None = None,
        worker_capacity: int = 1,
        worker_memory: str | int | None = None,
        store: Path | str | None = None,
        templates: dict[str, str] | None = None,
        park_timeout: float | None = None,
        token: str | None = None,
        grpc: bool = True,
        grpc_tls_cert: Path | str | None = None,
        grpc_tls_key: Path | str | None = None,
        grpc_client_ca: Path | str | None = None,
        router_tls_cert: Path | str | None = None,
        router_tls_key: Path | str | None = None,
        router_client_ca: Path | str | None = None,
        faults: list[str] | None = None,
        fault_seed: int | None = None,
        data_plane: bool = True,
        extra_args: list[str] | None = None,
        log_path: Path | str | None = None,
        start_timeout: float = 60.0,
        stop_timeout: float = 15.0,
    ) -> None:
        self.args = [
            sys.executable,
            "-m",
            "local_substrate",
            "serve",
            "--port",
            "0",
            "--embedded",
        ]
        # With pools the workers are theirs (docs/SPEC.md §2.6).
        if pools:
            workers = sum(pools.values())
            self.args += [arg for name, n in pools.items() for arg in ("--pool", f"{name}={n}")]
        else:
            self.args += ["--workers", str(workers)]
        # Left out at the defaults, so a command line reads as it did before capacity.
        if worker_capacity != 1:
            self.args += ["--worker-capacity", str(worker_capacity)]
        if worker_memory is not None:
            self.args += ["--worker-memory", str(worker_memory)]
        if store is not None:
            self.args += ["--store", str(store)]
        for ref, size in (templates or {}).items():
            self.args += ["--template", f"{ref}={size}"]
        if park_timeout is not None:
            self.args += ["--park-timeout", str(park_timeout)]
        if not grpc:
            self.args += ["--grpc-port", "none"]
        for flag, path in (
            ("--grpc-tls-cert", grpc_tls_cert),
            ("--grpc-tls-key", grpc_tls_key),
            ("--grpc-client-ca", grpc_client_ca),
            ("--router-tls-cert", router_tls_cert),
            ("--router-tls-key", router_tls_key),
            ("--router-client-ca", router_client_ca),
        ):
            if path is not None:
                self.args += [flag, str(path)]
        for rule in faults or ():
            self.args += ["--fault", rule]
        if fault_seed is not None:
            self.args += ["--fault-seed", str(fault_seed)]
        if not data_plane:
            self.args += ["--no-data-plane"]
        self.args += extra_args or []
        self.token = token
        # The launcher's token is the child's, set or not: one inherited from our own
        # environment would make the child ask for a token nobody here knows.
        self.env = {k: v for k, v in os.environ.items() if k != TOKEN_ENV}
        if token is not None:
            self.env[TOKEN_ENV] = token
        self.log_path = Path(log_path) if log_path else None
        self.start_timeout = start_timeout
        self.workers = workers
        self.worker_capacity = worker_capacity
        self.stop_timeout = stop_timeout
        self.process: subprocess.Popen[bytes] | None = None
        self.url = ""
        self.grpc_url = ""  # empty when started with grpc=False
        self.tls_url = ""  # the https router port: only with router_tls_cert/key

    def start(self) -> str:
        """Start the child and wait for both endpoint lines; the JSON wire's URL."""
        if self.log_path:
            with open(self.log_path, "ab") as log:
                self.process = self._spawn(log)
        else:
            self.process = self._spawn(subprocess.DEVNULL)
        assert self.process.stdout is not None
        # Read with a deadline (select, not a blocking readline): a child that printed one
        # line and then hangs must still end in start_timeout.
        fd = self.process.stdout.fileno()
        deadline = time.monotonic() + self.start_timeout
        pending = b""
        lines: list[str] = []
        while (left := deadline - time.monotonic()) > 0:
            if not select.select([fd], [], [], left)[0]:
                continue  # the loop ends at the deadline
            chunk = os.read(fd, 65536)
            if not chunk:  # the child exited
                self.kill()
                said = "".join(lines) + pending.decode(errors="replace")
                raise RuntimeError(f"local substrate exited while starting: {said[-2000:]!r}")
            pending += chunk
            *complete, pending = pending.split(b"\n")
            for raw in complete:
                line = raw.decode(errors="replace")
                lines.append(line + "\n")
                if match := _URL.search(line):
                    self.url = match.group(1)
                elif match := _TLS_ROUTER.search(line):
                    self.tls_url = match.group(1)
                elif (match := _GRPC.search(line)) and self.url:
                    self.grpc_url = match.group(1) or ""
                    return self.url
        self.kill()
        waited_for = "its gRPC line" if self.url else "its 'serving on' line"
        raise RuntimeError(
            f"local substrate did not start in {self.start_timeout:g} s (timed out waiting "
            f"for {waited_for}; {self.workers} workers); raise {START_TIMEOUT_SETTING} "
            "or give it fewer workers (target.local_workers)"
        )

    def _spawn(self, log: Any) -> subprocess.Popen[bytes]:
        return subprocess.Popen(
            self.args,
            stdin=subprocess.PIPE,  # the child's lifeline: closed when we go (--embedded)
            stdout=subprocess.PIPE,
            stderr=log,
            start_new_session=True,
            env=self.env,
        )

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                self.process.kill()
            self.process.wait()

    def stop(self) -> int | None:
        if self.process is None:
            return None
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(self.stop_timeout)
            except subprocess.TimeoutExpired:
                self.kill()
        # Only now: closing the lifeline of a child still running would make it wipe its store.
        for pipe in (self.process.stdout, self.process.stdin):
            if pipe is not None:
                with contextlib.suppress(OSError):
                    pipe.close()
        return self.process.returncode

    def _call(self, method: str, path: str, body: Any = None) -> dict[str, Any]:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(f"{self.url}{path}", data=data, method=method)
        request.add_header("Content-Type", "application/json")
        if self.token:
            request.add_header("Authorization", f"Bearer {self.token}")
        try:
            with urllib.request.urlopen(request, timeout=10) as answer:
                return json.loads(answer.read())
        except urllib.error.HTTPError as exc:  # the server's one-line reason, not just a code
            raise RuntimeError(f"{method} {path}: {exc.code} {exc.read().decode()}") from None

    def debug_workers(self) -> dict[str, Any]:
        return self._call("GET", DEBUG_WORKERS_PATH)

    def faults(self) -> dict[str, Any]:
        """The rules in force, each with its seen/fired counts, and the seed."""
        return self._call("GET", DEBUG_FAULTS_PATH)

    def set_faults(self, rules: list[str], seed: int | None = None) -> dict[str, Any]:
        """Replace the fault rules (fresh streams and counts); [] turns faults off."""
        body: Any = rules if seed is None else {"rules": rules, "seed": seed}
        return self._call("PUT", DEBUG_FAULTS_PATH, body)

    def __enter__(self) -> LocalSubstrateProcess:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


class LocalSubstrate:
    """The substrate subprocess, managed from async code (blocking work in threads)."""

    def __init__(self, **kwargs: Any) -> None:
        self.proc = LocalSubstrateProcess(**kwargs)

    @property
    def url(self) -> str:
        return self.proc.url

    @property
    def grpc_url(self) -> str:
        return self.proc.grpc_url

    @property
    def token(self) -> str | None:
        return self.proc.token

    def kill(self) -> None:
        self.proc.kill()

    async def faults(self) -> dict[str, Any]:
        return await asyncio.to_thread(self.proc.faults)

    async def set_faults(self, rules: list[str], seed: int | None = None) -> dict[str, Any]:
        return await asyncio.to_thread(self.proc.set_faults, rules, seed)

    async def __aenter__(self) -> LocalSubstrate:
        await asyncio.to_thread(self.proc.start)
        return self

    async def __aexit__(self, *exc: object) -> None:
        await asyncio.to_thread(self.proc.stop)
