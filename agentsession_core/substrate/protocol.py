"""The names of the substrate's JSON wire form (docs/SPEC.md §2), each defined once.

Both sides import from here: the clients (http.py, router_client.py, router_wire.py,
errors.py), the in-memory fake (fake.py) and the local substrate (local_substrate/). A name that a
client and a server spell differently is a bug no test of either side alone can see.

Plain constants and pure functions only: this module must stay importable without aiohttp,
httpx or the local server.
"""

from __future__ import annotations

import re

# ---- router (§2.2) -------------------------------------------------------------------------

TARGET_HEADER = "ate-target-actor"  # <atespace>/<actor> a request is for
ROUTER_HEADER = "x-ate-router"  # on the router's own verdicts, never on the glutton's answers
ROUTER_VERDICT = "1"  # ROUTER_HEADER's value
ELAPSED_HEADER = "x-server-elapsed-us"  # server handling time in microseconds, on every answer


def actor_target(atespace: str, actor: str) -> str:
    """TARGET_HEADER's value for one actor."""
    return f"{atespace}/{actor}"


# ---- error body (§2.1) and the status each code answers with ---------------------------------

ERROR_FIELD = "error"  # {"error": {"code": C, "message": M}}
CODE_FIELD = "code"
MESSAGE_FIELD = "message"

# Control-API answers (§2.1). INTERNAL is not in the contract: it is the local substrate's
# answer to its own bugs, so a client sees the protocol's shape even then.
STATUS_OF = {
    "NOT_FOUND": 404,
    "ACTOR_NOT_FOUND": 404,
    "ALREADY_EXISTS": 409,
    "FAILED_PRECONDITION": 412,
    "ABORTED": 409,
    "RESOURCE_EXHAUSTED": 429,
    "UNAVAILABLE": 503,
    "DEADLINE_EXCEEDED": 504,
    "INVALID_ARGUMENT": 400,
    "UNAUTHENTICATED": 401,
    "INTERNAL": 500,
}
# Router verdicts (§2.2) differ in one place: no room before the park timeout is a 503, the
# status load balancers and the session's retry rule (§3.4) both read as "try again later".
_ROUTER_STATUS_OF = {**STATUS_OF, "RESOURCE_EXHAUSTED": 503}


def status_of(code: str, *, router: bool = False) -> int:
    """The HTTP status an error code answers with (500 for a code outside the table)."""
    return (_ROUTER_STATUS_OF if router else STATUS_OF).get(code, 500)


def error_body(code: str, message: str) -> dict[str, dict[str, str]]:
    return {ERROR_FIELD: {CODE_FIELD: code, MESSAGE_FIELD: message}}


# ---- actors (§2.1) ---------------------------------------------------------------------------

ACTOR_STATUSES = (
    "RESUMING",
    "RUNNING",
    "SUSPENDING",
    "SUSPENDED",
    "PAUSING",
    "PAUSED",
    "CRASHED",
)

# ResumeActor's answer says whether it resumed anything (the ate wire's
# ResumeActorResponse.resumed): false when the actor was already RUNNING, so the suspend
# before it never happened (docs/SPEC.md §3.4: NOT_SUSPENDED). The JSON wire's ResumeActor
# answer is the actor object with this field beside its own.
RESUMED_FIELD = "resumed"

# The snapshot store's throttling, as the local substrate words it when its store refuses a
# write or a read (`store:throttle:SHARE`, docs/SPEC.md §2.4): RESOURCE_EXHAUSTED (429 on the
# JSON control API, a 503 router verdict, the gRPC status) whose message starts with this.
# Clients also know a real store's words (errors.says_store_throttled).
STORE_THROTTLED_PREFIX = "snapshot store throttled"

# Atespace and actor names become path segments (in URLs and in the local snapshot store),
# so they are held to a DNS-label-like pattern; glutton keys (§1.2) become file names.
NAME_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$")
KEY_PATTERN = re.compile(r"^[A-Za-z0-9_-]{1,128}$")

# The template CreateActor uses when its body names none.
DEFAULT_TEMPLATE = ("benchmark-workloads", "glutton")


# ---- control API paths (§2.1) ----------------------------------------------------------------
# Builders rather than strings so the server's route patterns and the OpenAPI document are
# the same text as the client's URLs: pass "{placeholder}" names to get a pattern.

CONTROL_PREFIX = "/v1"
OPENAPI_PATH = "/openapi.json"
METRICS_PATH = "/metrics"  # the local substrate's Prometheus metrics (docs/SPEC.md §5.9)
HEALTHZ_PATH = f"{CONTROL_PREFIX}/healthz"
DEBUG_WORKERS_PATH = f"{CONTROL_PREFIX}/debug/workers"
# The local substrate's fault rules (§2.4): GET reads them, PUT a JSON list replaces them.
DEBUG_FAULTS_PATH = f"{CONTROL_PREFIX}/debug/faults"
# POST …/actors/{n}:<verb>, each the JSON form of one ateapi.Control call: the local
# substrate serves a verb of this table as its ControlPlane method of the same name.
ACTOR_VERBS = {"resume": "ResumeActor", "suspend": "SuspendActor", "pause": "PauseActor"}
ASYNC_PARAM = "async"  # SuspendActor ?async=true: SuspendActorAsync, 202 at once
PAGE_TOKEN_PARAM = "page_token"
PAGE_SIZE_PARAM = "page_size"


def template_path(namespace: str, name: str) -> str:
    return f"{CONTROL_PREFIX}/templates/{namespace}/{name}"


def atespace_path(atespace: str) -> str:
    return f"{CONTROL_PREFIX}/atespaces/{atespace}"


def actors_path(atespace: str) -> str:
    return f"{atespace_path(atespace)}/actors"


def actor_path(atespace: str, actor: str, verb: str | None = None) -> str:
    return f"{actors_path(atespace)}/{actor}" + (f":{verb}" if verb else "")


def is_control_path(path: str) -> bool:
    """The control API owns /v1 and everything under it; the router every other path."""
    return path == CONTROL_PREFIX or path.startswith(f"{CONTROL_PREFIX}/")


# ---- glutton routes (§2.3) -------------------------------------------------------------------

PING = "/ping"
WRITERAM = "/writeram"
READRAM = "/readram"
WRITEDISK = "/writedisk"
READDISK = "/readdisk"
INGEST = "/ingest"  # raw body, the key in the query
BURNCPU = "/burncpu"
READYZ = "/readyz"  # GET, the only one that is not a POST
INGEST_KEY_PARAM = "key"
PAGE = 4096  # /readram touches one byte per page of the array (§1.2 walk_ram)

JSON_CONTENT_TYPE = "application/json"
OCTET_CONTENT_TYPE = "application/octet-stream"
# What each route's 2xx answer must hold on the JSON wire (§2.3): field -> type. A client
# refuses an answer without them (BAD_BODY) rather than counting a success it did not get.
# /readdisk in data mode answers the bytes themselves (OCTET_CONTENT_TYPE) instead.
ANSWER_FIELDS: dict[str, dict[str, type]] = {
    PING: {"message": str},
    WRITERAM: {"size": int},
    READRAM: {"size": int, "checksum": int},
    WRITEDISK: {"size": int, "sha256": str},
    READDISK: {"size": int, "sha256": str},
    INGEST: {"size": int, "sha256": str},
    BURNCPU: {"iterations": int},
}
RAW_ANSWER_ROUTES = frozenset({READDISK})  # may answer OCTET_CONTENT_TYPE


# ---- local substrate: server <-> worker (§2.4) -----------------------------------------------
# Not part of the public protocol: the admin routes of a worker process are reachable only
# with the per-pool secret, which the pool hands each worker as it forks it (random per
# start, or the server's WORKER_SECRET_ENV when set).

WORKER_SECRET_HEADER = "x-worker-secret"
WORKER_SECRET_ENV = "AGENTSESSION_WORKER_SECRET"
WORKER_ADMIN_PREFIX = "/_admin"
WORKER_READY = "LISTENING"  # a worker's handshake down its pipe: "LISTENING <port>"
# Router -> worker: the actor the router resolved the request to, so the worker can tell a
# request that arrived after its actor left (the ate wire's 421 stale assignment).
HOSTED_ACTOR_HEADER = "x-worker-actor"
# The bearer token handed to `agentsession substrate serve` by the launcher: kept off the
# command line, where every local user could read it in the process list.
TOKEN_ENV = "AGENTSESSION_SUBSTRATE_TOKEN"


# ---- the ate wire's router (Agent Substrate's own; docs/SPEC.md §2, §3.4) ----------------------
# A real router sets no verdict header: it answers its denials with a short text/plain body
# and the status alone says what happened. Both the ate client (which classifies them) and the
# local substrate (which answers like a real router on this wire) use these names.

PROTOBUF_CONTENT_TYPE = "application/x-protobuf"
# The name on the ate control API's serving certificate: clients check the certificate against
# it whatever address they dial (the ate wire notes, auth).
ATE_API_SERVER_NAME = "api.ate-system.svc"
ATE_SCHEMES = ("grpc://", "grpcs://")  # a control URL with one of these speaks the ate wire
TEXT_CONTENT_TYPE = "text/plain"
STALE_ASSIGNMENT_HEADER = "x-ate-assignment-stale"  # with 421: the actor left that worker
# The router's 404 when the actor does not exist (ResumeActor said NotFound). The glutton's own
# 404s name the missing array or file and never say "actor", which is how a client tells an
# actor that is gone (replace it) from an op that failed (count it).
ROUTER_ACTOR_GONE = "actor {target} not found"


def router_says_actor_gone(status: int, body: str) -> bool:
    """A 404 from the ate wire's router, not from the glutton inside the actor."""
    return status == 404 and "actor" in body.lower()


# ---- worker pools (docs/SPEC.md §2.6) ----------------------------------------------------------
# An actor's worker selector: the ate wire's Actor.worker_selector (a Selector, equality on
# labels), the JSON wire's `worker_selector: {"match_labels": {...}}` on CreateActor and in
# every actor answer. A pool's label becomes its workers' labels, under this key (the
# platform's own spelling: the selector is {pool: NAME}).
POOL_LABEL = "pool"
WORKER_SELECTOR_FIELD = "worker_selector"
MATCH_LABELS_FIELD = "match_labels"
MAX_SELECTOR_LABELS = 10  # the platform takes 1–10 labels in a selector
# A pool's name: a lowercase DNS-1123 label of at most 47 characters (the platform's deploy
# scripts prefix it to make the WorkerPool's own name).
POOL_NAME_PATTERN = re.compile(r"^[a-z0-9](?:[-a-z0-9]{0,45}[a-z0-9])?$")
POOL_NAME_RULE = (
    "a lowercase DNS-1123 label (a-z, 0-9, '-', starting and ending alphanumeric) "
    "of at most 47 characters"
)
# ResumeActor's FAILED_PRECONDITION when no pool's workers carry the selector's labels (the
# platform's words start the same way); a router passes it on in its 503's text. Never
# cured by retrying or by a replacement: the run is misconfigured (errors.py).
NO_POOL_MATCH = "no worker pool matches the template and actor selectors"


def says_no_pool_matches(message: str) -> bool:
    return NO_POOL_MATCH in message.lower()


# ---- workers (docs/SPEC.md §2.7) ---------------------------------------------------------------
# The worker listing (the platform's ListWorkers + ListWorkerActorAssignments, one call on
# the JSON wire) and DrainWorker. A worker holds up to `capacity` running actors, `allocated`
# of them now; `memory_used_bytes` is what counts against `memory_limit_bytes` (0: none).

WORKERS_PATH = f"{CONTROL_PREFIX}/workers"
WORKER_VERBS = ("drain",)  # POST /v1/workers/{name}:<verb>
WORKERS_FIELD = "workers"
WORKER_NAME_FIELD = "name"
WORKER_POOL_FIELD = "pool"
WORKER_STATE_FIELD = "state"  # "active" or "draining"
WORKER_CAPACITY_FIELD = "capacity"
WORKER_ALLOCATED_FIELD = "allocated"
WORKER_MEMORY_LIMIT_FIELD = "memory_limit_bytes"
WORKER_MEMORY_USED_FIELD = "memory_used_bytes"
WORKER_ACTORS_FIELD = "actors"  # "atespace/name" of each actor assigned to it, sorted
WORKER_PAUSED_FIELD = "paused"  # those of its actors paused there (their state in its memory)
WORKER_PID_FIELD = "pid"  # the local substrate's own: the worker's OS process


def worker_path(name: str, verb: str | None = None) -> str:
    return f"{WORKERS_PATH}/{name}" + (f":{verb}" if verb else "")
