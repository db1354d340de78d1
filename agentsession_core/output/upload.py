"""Upload a finished run directory to its destination, verified against the manifest.

The run directory is always written locally first (docs/SPEC.md §7: upload never loses a run). For a
local destination that is the destination: "upload" only verifies the files against
manifest.json. For ``s3://bucket/prefix`` every file goes to
``<prefix>/runs/<name>/run_date=…/run_ts=…/run_tag=…/<file>`` (the upstream layout), sent
with its sha256 so the store rejects a corrupted body, and checked afterwards (size and
checksum as the store reports them); manifest.json goes last, so a reader that finds it finds
every file it lists. Before any file the run claims its prefix (`claim_prefix`): a prefix that
another run already holds (two machines' runs with the same name and tag in the same second)
is never written into; this run goes to ``run_tag=<tag>.2`` (then .3 …), as a local twin does
(docs/SPEC.md §7). One call is one attempt; the caller retries (the campaign's upload task
does). When the last attempt fails, `record_failed_upload` says so in status.json and
re-seals the local manifest, and the local copy stays.

boto3 takes credentials, region and endpoint from the standard AWS chain (environment,
profile, instance role; ``AWS_ENDPOINT_URL`` for S3-compatible stores) unless given here.
Everything is synchronous: async callers use asyncio.to_thread.
"""

from __future__ import annotations

import base64
import hashlib
import logging
import socket
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import orjson

from agentsession_core.errors import AgentsessionError
from agentsession_core.output.run_dir import (
    MANIFEST,
    MAX_SAME_SECOND,
    RunDir,
    atomic_write,
    verify_manifest,
)

log = logging.getLogger("agentsession")


class UploadError(AgentsessionError):
    """The run could not be copied to its destination (the local copy is intact).
    `throttled`: the store refused for throttling (S3 503 SlowDown, a 429), a class of its
    own that the campaign's retries back off from with jitter (docs/SPEC.md §7)."""

    def __init__(self, message: str, *, throttled: bool = False) -> None:
        super().__init__(message)
        self.throttled = throttled


# What a store says when it throttles: S3's SlowDown (503), the 429s and throttling codes of
# S3-compatible stores and of GCS's XML API.
THROTTLE_CODES = frozenset(
    {
        "SlowDown",
        "Throttling",
        "ThrottlingException",
        "RequestLimitExceeded",
        "RequestThrottled",
        "TooManyRequests",
        "TooManyRequestsException",
        "429",
    }
)


def is_throttling(exc: BaseException) -> bool:
    """A boto3 error that is the store throttling us (by its error code or a 429)."""
    response = getattr(exc, "response", None)
    if not isinstance(response, dict):
        return False
    code = str(response.get("Error", {}).get("Code", ""))
    status = response.get("ResponseMetadata", {}).get("HTTPStatusCode")
    return code in THROTTLE_CODES or status == 429


@dataclass
class UploadResult:
    ok: bool
    location: str  # where the run now lives (the s3:// prefix, or the local directory)
    local_dir: str
    files: int = 0
    bytes: int = 0
    error: str | None = None
    attempts: int = 1
    uploaded_unix: float = field(default_factory=time.time)
    throttled: int = 0  # attempts the store refused for throttling

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def is_s3(url: str) -> bool:
    return url.startswith("s3://")


def split_s3(url: str) -> tuple[str, str]:
    """(bucket, key prefix without surrounding slashes) of an s3:// URL."""
    parts = urlsplit(url)
    if parts.scheme != "s3" or not parts.netloc:
        raise UploadError(f"{url!r}: not an s3://bucket/prefix URL")
    return parts.netloc, parts.path.strip("/")


def run_location(dest: str, run_dir: Path, local_root: str | Path) -> str:
    """Where `run_dir` (under `local_root`) lands under `dest`: same relative layout."""
    relative = _relative_layout(run_dir, local_root)
    if not is_s3(dest):
        return str(run_dir)
    bucket, prefix = split_s3(dest)
    key = f"{prefix}/{relative}" if prefix else relative
    return f"s3://{bucket}/{key}"


def _relative_layout(run_dir: Path, local_root: str | Path) -> str:
    root = Path(str(local_root).removeprefix("file://")).resolve()
    try:
        return run_dir.resolve().relative_to(root).as_posix()
    except ValueError:
        raise UploadError(f"run directory {run_dir} is not under {root}") from None


# Clients made so far, per thread and per (endpoint, region). Making a client reads botocore's
# service models from disk, about 0.2 s of CPU each time: a history of twelve nights read
# through S3 made 229 of them and took 50 s. boto3's sessions, which make clients, are not
# safe to share across threads, so each thread keeps its own.
_clients = threading.local()


def s3_client(endpoint_url: str | None = None, region: str | None = None) -> Any:
    """This thread's client for `endpoint_url` and `region` (made on first use)."""
    made: dict[tuple[str | None, str | None], Any] = _clients.__dict__.setdefault("made", {})
    key = (endpoint_url or None, region)
    if key not in made:
        made[key] = _new_s3_client(endpoint_url, region)
    return made[key]


def _new_s3_client(endpoint_url: str | None, region: str | None) -> Any:
    import boto3
    from botocore.config import Config

    config = Config(
        retries={"max_attempts": 2, "mode": "standard"},
        connect_timeout=5,
        read_timeout=30,
        s3={"addressing_style": "path"} if endpoint_url else {},
        request_checksum_calculation="when_required",
        response_checksum_validation="when_required",
    )
    return boto3.session.Session().client(
        "s3", endpoint_url=endpoint_url or None, region_name=region, config=config
    )


def _manifest(run_dir: Path) -> list[dict[str, Any]]:
    try:
        return orjson.loads((run_dir / MANIFEST).read_bytes())["files"]
    except FileNotFoundError:
        raise UploadError(f"{run_dir / MANIFEST}: missing; the run did not finish") from None
    except (orjson.JSONDecodeError, KeyError, TypeError) as exc:
        raise UploadError(f"{run_dir / MANIFEST}: unreadable ({exc})") from None


def upload_run(
    run_dir: str | Path,
    dest: str,
    *,
    local_root: str | Path,
    endpoint_url: str | None = None,
    region: str | None = None,
) -> UploadResult:
    """One attempt to put the run at `dest`; raises UploadError (naming the file) on failure."""
    run_dir = Path(run_dir)
    problems = verify_manifest(run_dir)
    if problems:
        raise UploadError(f"local copy does not match its manifest: {problems[0]}")
    location = run_location(dest, run_dir, local_root)
    if not is_s3(dest):
        entries = _manifest(run_dir)
        return UploadResult(True, location, str(run_dir), len(entries), _size(entries))
    client = s3_client(endpoint_url, region)
    claimed = claim_prefix(client, location, claim_owner(run_dir))
    if claimed != location:
        _relocate_gate(run_dir, location, claimed)
        location = claimed
    entries = _manifest(run_dir)
    total = _size(entries)
    bucket, key_prefix = split_s3(location)
    manifest_bytes = (run_dir / MANIFEST).read_bytes()
    for entry in entries:
        data = (run_dir / entry["path"]).read_bytes()
        _put_verified(client, bucket, f"{key_prefix}/{entry['path']}", data, entry["sha256"])
    manifest_digest = hashlib.sha256(manifest_bytes).hexdigest()
    _put_verified(client, bucket, f"{key_prefix}/{MANIFEST}", manifest_bytes, manifest_digest)
    log.info("uploaded %d files (%d bytes) to %s", len(entries) + 1, total, location)
    return UploadResult(True, location, str(run_dir), len(entries) + 1, total + len(manifest_bytes))


def _size(entries: list[dict[str, Any]]) -> int:
    return sum(int(e["size"]) for e in entries)


def _relocate_gate(run_dir: Path, meant: str, claimed: str) -> None:
    """gate.json names where the run lives: the twin prefix it got, not the one it was meant
    for (another run's). The local copy is re-sealed before any file goes up."""
    path = run_dir / "gate.json"
    try:
        gate = orjson.loads(path.read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return  # no readable gate.json: nothing names a location
    if isinstance(gate, dict) and gate.get("location") == meant:
        gate["location"] = claimed
        sealed = RunDir(run_dir)
        sealed.write_json("gate.json", gate)
        sealed.write_manifest()


def claim_owner(run_dir: Path) -> str:
    """Who a claim names: this machine and the run's local directory, which is exclusive on
    it (RunDir.create), so a retry of the same upload recognises its own claim."""
    return f"{socket.gethostname()}:{run_dir.resolve()}"


def claim_prefix(client: Any, location: str, owner: str) -> str:
    """The s3:// prefix this run may write: `location`, or the first of ``<location>.2`` …
    that no other run holds. A claim is the object ``<prefix>.claim`` (beside the prefix, so
    the run's own listing holds only its files), put only if absent (If-None-Match: *); a
    prefix that already holds objects without a claim (a run uploaded before claims existed)
    is someone else's too."""
    for copy in range(1, MAX_SAME_SECOND + 1):
        candidate = location if copy == 1 else f"{location}.{copy}"
        if _claim(client, candidate, owner):
            if copy > 1:
                log.warning(
                    "%s already holds another run (same name and tag, same second): this run "
                    "is uploaded to %s",
                    location,
                    candidate,
                )
            return candidate
    raise UploadError(f"{location}: {MAX_SAME_SECOND} runs already hold this prefix and its twins")


def _claim(client: Any, location: str, owner: str) -> bool:
    from botocore.exceptions import BotoCoreError, ClientError

    bucket, prefix = split_s3(location)
    key = f"{prefix}.claim"
    try:
        try:
            client.put_object(Bucket=bucket, Key=key, Body=owner.encode(), IfNoneMatch="*")
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") not in ("PreconditionFailed", "412"):
                raise
            held = client.get_object(Bucket=bucket, Key=key)["Body"].read().decode()
            return bool(held == owner)  # ours: a retry of this upload
        listed = client.list_objects_v2(Bucket=bucket, Prefix=f"{prefix}/", MaxKeys=1)
        if listed.get("KeyCount", 0):  # an older run without a claim: not ours to write into
            client.delete_object(Bucket=bucket, Key=key)
            return False
    except (BotoCoreError, ClientError) as exc:
        raise UploadError(f"s3://{bucket}/{key}: {exc}", throttled=is_throttling(exc)) from None
    return True


def _put_verified(client: Any, bucket: str, key: str, data: bytes, sha256_hex: str) -> None:
    from botocore.exceptions import BotoCoreError, ClientError

    if hashlib.sha256(data).hexdigest() != sha256_hex:
        raise UploadError(f"{key}: local file changed since the manifest was written")
    checksum = base64.b64encode(bytes.fromhex(sha256_hex)).decode("ascii")
    where = f"s3://{bucket}/{key}"
    try:
        client.put_object(
            Bucket=bucket,
            Key=key,
            Body=data,
            ChecksumSHA256=checksum,
            Metadata={"sha256": sha256_hex},
        )
        head = client.head_object(Bucket=bucket, Key=key, ChecksumMode="ENABLED")
    except (BotoCoreError, ClientError) as exc:
        raise UploadError(f"{where}: {exc}", throttled=is_throttling(exc)) from None
    stored = head.get("Metadata", {}).get("sha256")
    stored_checksum = head.get("ChecksumSHA256")
    if (
        head.get("ContentLength") != len(data)
        or stored != sha256_hex
        or (stored_checksum is not None and stored_checksum != checksum)
    ):
        raise UploadError(f"{where}: stored object does not match the manifest's sha256")


def record_failed_upload(run_dir: str | Path, dest: str, error: str, attempts: int) -> None:
    """status.json says the upload failed and where the run stays; the manifest is re-sealed
    so the local copy still verifies."""
    run = RunDir(Path(run_dir))
    status_path = run.file("status.json")
    try:
        status = orjson.loads(status_path.read_bytes())
    except (OSError, orjson.JSONDecodeError):
        status = {}
    status["upload"] = {
        "ok": False,
        "dest": dest,
        "error": error,
        "attempts": attempts,
        "local_copy": str(run.path),
        "failed_unix": time.time(),
    }
    run.write_json("status.json", status)
    run.write_manifest()


# ---------------------------------------------------------------- reading back (the gate)
def rewrite_run_file(
    location: str,
    name: str,
    data: bytes,
    *,
    endpoint_url: str | None = None,
    region: str | None = None,
) -> None:
    """Replace one file of a sealed run (a directory or an s3:// prefix) and its manifest
    entry, so the run still verifies (`agentsession gate --write`)."""
    if not is_s3(location):
        run_dir = RunDir(Path(location.removeprefix("file://")))
        try:
            atomic_write(run_dir.path / name, data)
            if (run_dir.path / MANIFEST).exists():
                run_dir.write_manifest()
        except OSError as exc:
            raise UploadError(
                f"{run_dir.path / name}: cannot write ({exc.strerror or exc})"
            ) from None
        return
    manifest_url = f"{location.rstrip('/')}/{MANIFEST}"
    try:
        manifest = orjson.loads(read_object(manifest_url, endpoint_url=endpoint_url, region=region))
        entries = manifest["files"]
    except (orjson.JSONDecodeError, KeyError, TypeError) as exc:
        raise UploadError(f"{manifest_url}: unreadable ({exc})") from None
    digest = hashlib.sha256(data).hexdigest()
    entries = [e for e in entries if e.get("path") != name]
    entries.append({"path": name, "size": len(data), "sha256": digest})
    manifest["files"] = sorted(entries, key=lambda e: str(e.get("path")))
    manifest_bytes = orjson.dumps(manifest, option=orjson.OPT_INDENT_2) + b"\n"
    bucket, prefix = split_s3(location.rstrip("/"))
    client = s3_client(endpoint_url, region)
    _put_verified(client, bucket, f"{prefix}/{name}", data, digest)
    manifest_digest = hashlib.sha256(manifest_bytes).hexdigest()
    _put_verified(client, bucket, f"{prefix}/{MANIFEST}", manifest_bytes, manifest_digest)


def put_file(
    location: str,
    name: str,
    data: bytes,
    *,
    endpoint_url: str | None = None,
    region: str | None = None,
) -> None:
    """Put one file beside a run's files (a directory: through a temp file and a rename; an
    s3:// prefix: sha256-checked on receipt and read back), its manifest left as it is: a
    file that is no part of the run (an acceptance record, judge/acceptance.py)."""
    if not is_s3(location):
        path = Path(location.removeprefix("file://")) / name
        try:
            atomic_write(path, data)
        except OSError as exc:
            raise UploadError(f"{path}: cannot write ({exc.strerror or exc})") from None
        return
    bucket, prefix = split_s3(location.rstrip("/"))
    client = s3_client(endpoint_url, region)
    _put_verified(client, bucket, f"{prefix}/{name}", data, hashlib.sha256(data).hexdigest())


class NoSuchObject(UploadError):
    """The s3:// key does not exist (a reader treats it as a missing file)."""


def _missing(exc: Exception) -> bool:
    code = str(getattr(exc, "response", {}).get("Error", {}).get("Code", ""))
    return code in ("404", "NoSuchKey", "NotFound")


def read_object(
    url: str,
    *,
    endpoint_url: str | None = None,
    region: str | None = None,
    max_bytes: int | None = None,
) -> bytes:
    """The bytes of an s3:// object or a local file (file:// or a path); with `max_bytes`,
    at most that many plus one (so a caller can tell an object over its cap without
    holding all of it). A missing key is NoSuchObject."""
    if not is_s3(url):
        path = Path(url.removeprefix("file://"))
        try:
            return path.read_bytes()
        except OSError as exc:
            raise UploadError(f"{path}: cannot read: {exc.strerror or exc}") from None
    from botocore.exceptions import BotoCoreError, ClientError

    bucket, key = split_s3(url)
    extra = {} if max_bytes is None else {"Range": f"bytes=0-{max_bytes}"}
    try:
        response = s3_client(endpoint_url, region).get_object(Bucket=bucket, Key=key, **extra)
        body = response["Body"]
        return body.read() if max_bytes is None else body.read(max_bytes + 1)
    except ClientError as exc:
        if _missing(exc):
            raise NoSuchObject(f"{url}: NoSuchKey") from None
        raise UploadError(f"{url}: {exc}") from None
    except BotoCoreError as exc:
        raise UploadError(f"{url}: {exc}") from None


def head_object(
    url: str, *, endpoint_url: str | None = None, region: str | None = None
) -> dict[str, Any] | None:
    """An s3:// object's size and checksums without its bytes: {"size", "sha256" (the
    metadata _put_verified writes, or None), "checksum_sha256" (the store's own, base64, or
    None)}; None when the key does not exist."""
    from botocore.exceptions import BotoCoreError, ClientError

    bucket, key = split_s3(url)
    try:
        head = s3_client(endpoint_url, region).head_object(
            Bucket=bucket, Key=key, ChecksumMode="ENABLED"
        )
    except ClientError as exc:
        if _missing(exc):
            return None
        raise UploadError(f"{url}: {exc}") from None
    except BotoCoreError as exc:
        raise UploadError(f"{url}: {exc}") from None
    checksum = head.get("ChecksumSHA256")
    # A multipart object's checksum is of its parts ("…-3"), not of its bytes.
    if head.get("ChecksumType") == "COMPOSITE" or (checksum and "-" in checksum):
        checksum = None
    return {
        "size": int(head.get("ContentLength", 0)),
        "sha256": (head.get("Metadata") or {}).get("sha256"),
        "checksum_sha256": checksum,
    }


def list_sizes(
    url: str, *, endpoint_url: str | None = None, region: str | None = None
) -> dict[str, int]:
    """{key relative to the prefix: size} of every object under an s3:// prefix."""
    from botocore.exceptions import BotoCoreError, ClientError

    bucket, prefix = split_s3(url)
    base = f"{prefix}/" if prefix else ""
    sizes: dict[str, int] = {}
    try:
        pages = s3_client(endpoint_url, region).get_paginator("list_objects_v2")
        for page in pages.paginate(Bucket=bucket, Prefix=base):
            for item in page.get("Contents", []):
                sizes[item["Key"][len(base) :]] = int(item.get("Size", 0))
    except (BotoCoreError, ClientError) as exc:
        raise UploadError(f"{url}: {exc}") from None
    return sizes


def list_objects(
    url: str, *, endpoint_url: str | None = None, region: str | None = None
) -> list[str]:
    """Keys (relative to the prefix) under an s3:// prefix, sorted."""
    from botocore.exceptions import BotoCoreError, ClientError

    bucket, prefix = split_s3(url)
    base = f"{prefix}/" if prefix else ""
    keys: list[str] = []
    try:
        pages = s3_client(endpoint_url, region).get_paginator("list_objects_v2")
        for page in pages.paginate(Bucket=bucket, Prefix=base):
            keys.extend(item["Key"][len(base) :] for item in page.get("Contents", []))
    except (BotoCoreError, ClientError) as exc:
        raise UploadError(f"{url}: {exc}") from None
    return sorted(keys)
