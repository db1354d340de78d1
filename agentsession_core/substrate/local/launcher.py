"""Start a local substrate as a subprocess (`agentsession substrate serve --port 0 ...`),
for the engine when no substrate URL is given and for tests.

    async with LocalSubstrate(workers=4, store=tmp) as sub:
        sub.url        # http://127.0.0.1:PORT: the JSON control API and the router
        sub.grpc_url   # grpc://127.0.0.1:PORT (grpcs:// with TLS): ateapi.Control

    with LocalSubstrateProcess(workers=4) as sub:   # same, from non-async code
        sub.url

The child prints two lines (server.serve_forever): `... serving on http://...` and
`... ate control (gRPC) on grpc://...` (or `... off`); both are read, then stderr goes to
`log_path` (or is discarded). The token reaches the child in its environment (TOKEN_ENV),
never on its command line, which any local user can read. Exit sends SIGTERM and waits
`stop_timeout`, then kills.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

from agentsession_core.substrate.protocol import DEBUG_WORKERS_PATH, TOKEN_ENV

_URL = re.compile(r"serving on (http://\S+)")
_GRPC = re.compile(r"ate control \(gRPC\) (?:on (grpcs?://\S+)|off)")


class LocalSubstrateProcess:
    """The substrate subprocess, managed from synchronous code."""

    def __init__(
        self,
        *,
        workers: int = 4,
        store: Path | str | None = None,
        templates: dict[str, str] | None = None,
        park_timeout: float | None = None,
        token: str | None = None,
        grpc: bool = True,
        grpc_tls_cert: Path | str | None = None,
        grpc_tls_key: Path | str | None = None,
        grpc_client_ca: Path | str | None = None,
        extra_args: list[str] | None = None,
        log_path: Path | str | None = None,
        start_timeout: float = 60.0,
        stop_timeout: float = 15.0,
    ) -> None:
        self.args = [
            sys.executable,
            "-m",
            "agentsession_core",
            "substrate",
            "serve",
            "--port",
            "0",
            "--workers",
            str(workers),
        ]
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
        ):
            if path is not None:
                self.args += [flag, str(path)]
        self.args += extra_args or []
        self.token = token
        # The launcher's token is the child's, set or not: one inherited from our own
        # environment would make the child ask for a token nobody here knows.
        self.env = {k: v for k, v in os.environ.items() if k != TOKEN_ENV}
        if token is not None:
            self.env[TOKEN_ENV] = token
        self.log_path = Path(log_path) if log_path else None
        self.start_timeout = start_timeout
        self.stop_timeout = stop_timeout
        self.process: subprocess.Popen[bytes] | None = None
        self.url = ""
        self.grpc_url = ""  # empty when started with grpc=False

    def start(self) -> str:
        """Start the child and wait for both endpoint lines; the JSON wire's URL."""
        if self.log_path:
            with open(self.log_path, "ab") as log:
                self.process = self._spawn(log)
        else:
            self.process = self._spawn(subprocess.DEVNULL)
        assert self.process.stdout is not None
        deadline = time.monotonic() + self.start_timeout
        lines: list[str] = []
        while time.monotonic() < deadline:
            raw = self.process.stdout.readline()
            if not raw:
                break
            line = raw.decode(errors="replace")
            lines.append(line)
            if match := _URL.search(line):
                self.url = match.group(1)
            elif (match := _GRPC.search(line)) and self.url:
                self.grpc_url = match.group(1) or ""
                return self.url
        self.kill()
        raise RuntimeError(f"local substrate did not start: {''.join(lines)[-2000:]!r}")

    def _spawn(self, log: Any) -> subprocess.Popen[bytes]:
        return subprocess.Popen(
            self.args, stdout=subprocess.PIPE, stderr=log, start_new_session=True, env=self.env
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
        if self.process.stdout is not None:
            self.process.stdout.close()
        return self.process.returncode

    def debug_workers(self) -> dict[str, Any]:
        request = urllib.request.Request(f"{self.url}{DEBUG_WORKERS_PATH}")
        if self.token:
            request.add_header("Authorization", f"Bearer {self.token}")
        with urllib.request.urlopen(request, timeout=10) as answer:
            return json.loads(answer.read())

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

    async def __aenter__(self) -> LocalSubstrate:
        await asyncio.to_thread(self.proc.start)
        return self

    async def __aexit__(self, *exc: object) -> None:
        await asyncio.to_thread(self.proc.stop)
