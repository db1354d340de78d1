"""Hosts of their own on one machine: network namespaces joined by a bridge (issue 21).

`Hosts(["sched", "w0", "w1", "sub"])` makes one network namespace per name, each with a veth
into a bridge that lives in a namespace of its own, each with its own address on one /24
(10.N.0.2, .3, …; no default route, no NAT: only the hosts on the bridge reach each other).
This process (the coordinator) joins the bridge too, as 10.N.0.1, so it reaches every host
over a real interface. Processes started with `Hosts.start` run inside a host's namespace
(`ip netns exec NAME …`); leaving the block kills them and deletes every namespace — and
with them every veth — also when the test failed.

`netns_refusal()` says why namespaces cannot be made here (not root, no `ip`, a sandbox
without CAP_SYS_ADMIN), for a skip with that reason.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType

from local_substrate.launcher import LocalSubstrateProcess

IP = shutil.which("ip") or "/usr/sbin/ip"
BRIDGE = "br0"


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run([IP, *args], check=check, capture_output=True, text=True, timeout=20)


def netns_refusal() -> str | None:
    """None when this process may make network namespaces; else why not, in one line."""
    if not os.path.exists(IP):
        return "no `ip` command (apt-get install iproute2)"
    if os.geteuid() != 0:
        return "network namespaces need root"
    probe = f"asprobe{os.getpid()}"
    made = _ip("netns", "add", probe, check=False)
    if made.returncode != 0:
        return f"`ip netns add` is not permitted here: {made.stderr.strip()}"
    _ip("netns", "del", probe, check=False)
    return None


def _free_subnet() -> int:
    """A 10.N.0.0/24 no interface of this machine uses (N from the pid, then the next)."""
    used = _ip("-4", "addr").stdout
    for step in range(100):
        n = 100 + (os.getpid() + step) % 100
        if f"inet 10.{n}." not in used:
            return n
    raise RuntimeError("no free 10.N.0.0/24 for the namespaces")


class Hosts:
    """Namespaces named `<tag><name>` on one bridge; `address(name)` is each one's IPv4."""

    def __init__(self, names: Sequence[str]) -> None:
        self.names = list(names)
        self.tag = f"as{os.getpid() % 100000}"
        self.subnet = _free_subnet()
        self.bridge_ns = f"{self.tag}br"
        self.processes: list[subprocess.Popen[bytes]] = []
        self.substrates: list[LocalSubstrateProcess] = []
        self._veths: list[str] = []

    def namespace(self, name: str) -> str:
        return f"{self.tag}{name}"

    def address(self, name: str) -> str:
        return f"10.{self.subnet}.0.{self.names.index(name) + 2}"

    @property
    def coordinator(self) -> str:
        return f"10.{self.subnet}.0.1"

    # ------------------------------------------------------------ making and deleting
    def __enter__(self) -> Hosts:
        try:
            self._make()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType
    ) -> None:
        self.close()

    def _make(self) -> None:
        _ip("netns", "add", self.bridge_ns)
        _ip("-n", self.bridge_ns, "link", "add", BRIDGE, "type", "bridge")
        _ip("-n", self.bridge_ns, "link", "set", BRIDGE, "up")
        for i, name in enumerate(self.names):
            ns = self.namespace(name)
            _ip("netns", "add", ns)
            _ip("-n", ns, "link", "set", "lo", "up")
            self._plug(f"{self.tag}h{i}", ns, self.address(name))
        self._plug(f"{self.tag}c", None, self.coordinator)  # this process's own interface

    def _plug(self, veth: str, ns: str | None, address: str) -> None:
        """A veth pair: `veth` in `ns` (None: this namespace) with `address`, its peer on the
        bridge."""
        peer = f"{veth}p"
        _ip("link", "add", veth, "type", "veth", "peer", "name", peer)
        self._veths.append(veth)
        _ip("link", "set", peer, "netns", self.bridge_ns)
        _ip("-n", self.bridge_ns, "link", "set", peer, "master", BRIDGE, "up")
        where = ["-n", ns] if ns is not None else []
        if ns is not None:
            _ip("link", "set", veth, "netns", ns)
        _ip(*where, "addr", "add", f"{address}/24", "dev", veth)
        _ip(*where, "link", "set", veth, "up")

    def close(self) -> None:
        """Kill what runs in the namespaces, delete them (their veths go with them)."""
        for substrate in self.substrates:
            with contextlib.suppress(Exception):
                substrate.stop()
        for proc in self.processes:
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
            with contextlib.suppress(Exception):
                proc.wait(10)
        for name in self.names:
            _ip("netns", "del", self.namespace(name), check=False)
        _ip("netns", "del", self.bridge_ns, check=False)
        for veth in self._veths:  # deleted with the bridge's namespace; this is a backstop
            _ip("link", "del", veth, check=False)

    def leftovers(self) -> list[str]:
        """Namespaces and links of this harness still on the machine (none once closed)."""
        names = _ip("netns", "list", check=False).stdout.split()
        links = _ip("-o", "link", check=False).stdout
        return [n for n in names if n.startswith(self.tag)] + [
            v for v in self._veths if f" {v}@" in links or f" {v}:" in links
        ]

    # ------------------------------------------------------------ processes in a namespace
    def start(self, name: str, command: Sequence[str], log: Path) -> subprocess.Popen[bytes]:
        """`command` inside host `name`'s namespace (its own session: killed as a group)."""
        with log.open("ab") as out:
            proc = subprocess.Popen(
                [IP, "netns", "exec", self.namespace(name), *command],
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self.processes.append(proc)
        return proc

    def substrate(self, name: str, log: Path, **kwargs: object) -> LocalSubstrateProcess:
        """`agentsession substrate serve` inside `name`, listening on its address only."""
        extra = ["--host", self.address(name), "--port", "8080", "--grpc-port", "8081"]
        proc = LocalSubstrateProcess(log_path=log, extra_args=extra, **kwargs)  # type: ignore[arg-type]
        proc.args = [IP, "netns", "exec", self.namespace(name), *proc.args]
        self.substrates.append(proc)
        proc.start()
        return proc

    def wait_for_port(self, name: str, port: int, timeout: float = 60.0) -> None:
        """Until host `name` accepts TCP on `port` (seen from this process, over the bridge)."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                with socket.create_connection((self.address(name), port), timeout=1.0):
                    return
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)


__all__ = ["Hosts", "netns_refusal"]
