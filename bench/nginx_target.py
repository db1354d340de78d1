"""The fast target: a private nginx (own prefix, pid file and free port on 127.0.0.1),
pinned to one core, stopped when the `with` block ends. Never touches the system nginx."""

from __future__ import annotations

import contextlib
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

TEMPLATE = Path(__file__).parent / "nginx" / "nginx.conf.template"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_listening(port: int, proc: subprocess.Popen, log: Path, deadline_s: float = 10) -> None:
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        if proc.poll() is not None:
            raise RuntimeError(f"nginx exited ({proc.returncode}): {log.read_text()[-2000:]}")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.2):
            return
        time.sleep(0.05)
    raise RuntimeError(f"nginx did not listen on 127.0.0.1:{port} within {deadline_s}s")


@contextlib.contextmanager
def nginx_target(core: int | None = 1, template: Path = TEMPLATE) -> Iterator[str]:
    """Yields the base URL (http://127.0.0.1:PORT) of a running private nginx, configured from
    `template` (default: the generator bench's fixed JSON answers)."""
    binary = shutil.which("nginx") or "/usr/sbin/nginx"
    if not Path(binary).exists():
        raise RuntimeError("nginx is not installed: apt-get install -y nginx-light")
    with tempfile.TemporaryDirectory(prefix="bench-nginx-") as prefix:
        Path(prefix).chmod(0o755)
        port = free_port()
        conf = Path(prefix) / "nginx.conf"
        conf.write_text(
            template.read_text().replace("@PREFIX@", prefix).replace("@PORT@", str(port))
        )
        pin = ["taskset", "-c", str(core)] if core is not None and shutil.which("taskset") else []
        proc = subprocess.Popen(
            [*pin, binary, "-p", prefix, "-c", str(conf)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            _wait_listening(port, proc, Path(prefix) / "error.log")
            yield f"http://127.0.0.1:{port}"
        finally:
            proc.send_signal(signal.SIGTERM)  # fast shutdown of master and its worker
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


if __name__ == "__main__":
    with nginx_target() as url:
        print(url, flush=True)
        import urllib.request

        print(urllib.request.urlopen(url + "/v1/templates/a/b").read())
        req = urllib.request.Request(url + "/ping", data=b"{}", method="POST")
        print(urllib.request.urlopen(req).read())
