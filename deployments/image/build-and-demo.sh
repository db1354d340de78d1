#!/usr/bin/env bash
# Build the agentsession image and run the demo campaign in it, with podman, on a Debian
# machine that reaches only package registries (no image registry):
#
#   1. install podman and mmdebstrap if missing (apt-get; root)
#   2. make a Debian bookworm base with mmdebstrap (python3, python3-venv, python3-pip,
#      ca-certificates) from this machine's own Debian mirror, import it into podman
#      (skipped when that base is already there: re-running reuses it)
#   3. build deployments/image/Containerfile on it (--build-arg BASE=...); pip in the build
#      reaches the package index this machine's pip is configured for, through build secrets
#   4. run `agentsession campaign --preset demo` in the image, no network, read-only root,
#      artifacts on a mounted host directory
#   5. `agentsession gate` on that run directory, in the image: exit 0 only on `pass`
#
# Every step has a time limit and prints how long it took. Exit codes: 0 the demo's verdict
# is pass; 1 a step failed, timed out or the verdict is not pass; 77 this machine cannot do it
# (not root, not Debian, podman or mmdebstrap cannot be installed): one line says why.
#
#   deployments/image/build-and-demo.sh [--rebuild-base]
#
# Environment (all optional): AGENTSESSION_IMAGE (default localhost/agentsession:latest),
# AGENTSESSION_IMAGE_WORK (default /var/tmp/agentsession-image: the staged build context, the
# logs, the artifacts), AGENTSESSION_IMAGE_ARTIFACTS (the host directory mounted at
# /artifacts; default $AGENTSESSION_IMAGE_WORK/artifacts).
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
CONTAINERFILE="$REPO/deployments/image/Containerfile"
IMAGE=${AGENTSESSION_IMAGE:-localhost/agentsession:latest}
WORK=${AGENTSESSION_IMAGE_WORK:-/var/tmp/agentsession-image}
ARTIFACTS=${AGENTSESSION_IMAGE_ARTIFACTS:-$WORK/artifacts}
LOGS="$WORK/logs"
SUITE=bookworm
VARIANT=apt
INCLUDE=python3,python3-venv,python3-pip,ca-certificates
APP_UID=10001
# The packages this needs on the host: rootful podman (netavark for its network stack,
# catatonit for --init) and mmdebstrap (root mode: no uidmap, no fuse-overlayfs; the storage
# is the kernel's overlay on the host's filesystem). The OCI runtime: crun on a cgroup v2
# machine; runc where cgroup v1 is mounted beside v2 ("hybrid", this machine), which crun 1.8
# refuses ("cgroups in hybrid mode not supported").
PACKAGES=(podman netavark catatonit mmdebstrap)
if [ -r /sys/fs/cgroup/cgroup.controllers ]; then
  RUNTIME=crun
else
  RUNTIME=runc
fi
PACKAGES+=("$RUNTIME")

# Time limits (seconds), generous on two busy cores; what they took here is in
# docs/how-to/container.md.
T_INSTALL=900
T_BASE=1200
T_IMPORT=300
T_BUILD=1800
T_DEMO=900
T_GATE=120

rebuild_base=0
for arg in "$@"; do
  case $arg in
    --rebuild-base) rebuild_base=1 ;;
    -h | --help) sed -n '2,25p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "build-and-demo: unknown argument $arg" >&2; exit 2 ;;
  esac
done

say() { echo "image: $*"; }
skip() { say "skipped: $*"; exit 77; }

# --- what this machine is -------------------------------------------------------------------
[ "$(uname -s)" = Linux ] || skip "not Linux ($(uname -s)): podman and mmdebstrap need a Debian machine"
{ [ -r /etc/debian_version ] && command -v apt-get >/dev/null && command -v dpkg-query >/dev/null; } ||
  skip "not a Debian machine (no apt-get): podman and mmdebstrap cannot be installed here"
[ "$(id -u)" = 0 ] || skip "not root: this builds with rootful podman and mmdebstrap's root mode"

mkdir -p "$WORK" "$LOGS" "$ARTIFACTS"
TIMINGS=()
total_start=$SECONDS

summary() {
  local joined
  joined=$(printf '%s; ' "${TIMINGS[@]}")
  say "timings: ${joined%; } (total $((SECONDS - total_start)) s)"
}

# step NAME LIMIT FUNCTION: runs FUNCTION in a bash of its own under `timeout`, its output in
# $LOGS/NAME.log; on failure prints the log's end and exits 1.
step() {
  local name=$1 limit=$2 fn=$3 t0=$SECONDS rc=0
  timeout --kill-after=30 "$limit" bash -euo pipefail -c "$(declare -f "$fn"); $fn" \
    >"$LOGS/$name.log" 2>&1 || rc=$?
  local took=$((SECONDS - t0))
  TIMINGS+=("$name ${took} s")
  if [ "$rc" -ne 0 ]; then
    if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
      say "$name: timed out after $limit s; the end of $LOGS/$name.log:"
    else
      say "$name: failed (exit $rc) after $took s; the end of $LOGS/$name.log:"
    fi
    tail -n 25 "$LOGS/$name.log" | sed 's/^/  | /'
    summary
    exit 1
  fi
  say "$name: $took s"
}

installed() { [ "$(dpkg-query -W -f='${Status}' "$1" 2>/dev/null)" = "install ok installed" ]; }

# --- 1. podman and mmdebstrap --------------------------------------------------------------
MISSING=()
for p in "${PACKAGES[@]}"; do installed "$p" || MISSING+=("$p"); done
export MISSING_PACKAGES="${MISSING[*]}"
install_packages() {
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q
  # shellcheck disable=SC2086  # a list of package names
  apt-get install -y -q --no-install-recommends $MISSING_PACKAGES
}
if [ ${#MISSING[@]} -gt 0 ]; then
  t0=$SECONDS
  if ! timeout --kill-after=30 "$T_INSTALL" bash -euo pipefail -c \
    "$(declare -f install_packages); install_packages" >"$LOGS/install.log" 2>&1; then
    skip "cannot install ${MISSING[*]} with apt-get ($(tail -n 1 "$LOGS/install.log"))"
  fi
  TIMINGS+=("install $((SECONDS - t0)) s")
  say "install (${MISSING[*]}): $((SECONDS - t0)) s"
else
  TIMINGS+=("install 0 s (present)")
  say "install: podman $(podman --version | awk '{print $3}') and mmdebstrap already there"
fi

# Podman's settings for this script only (CONTAINERS_CONF: the machine's own files are left
# alone): the runtime above; without systemd as PID 1 (containers, CI machines) cgroups
# through cgroupfs and events to a file. A container's open-file and process limits: rootful
# podman asks for 1048576 of each, which a root without CAP_SYS_RESOURCE cannot grant (this
# machine: 20000 open files at most), and the runtime then fails every container; so this
# shell's hard limits, processes at most kernel.pid_max (above it the runtime's setrlimit was
# refused here too).
PODMAN=(podman)
export CONTAINERS_CONF="$WORK/containers.conf"
nofile=$(ulimit -Hn)
nproc=$(ulimit -Hu)
pid_max=$(cat /proc/sys/kernel/pid_max 2>/dev/null || echo 32768)
[ "$nofile" = unlimited ] && nofile=1048576
{ [ "$nproc" = unlimited ] || [ "$nproc" -gt "$pid_max" ]; } && nproc=$pid_max
{
  echo "[containers]"
  echo "default_ulimits = [\"nofile=$nofile:$nofile\", \"nproc=$nproc:$nproc\"]"
  echo "[engine]"
  echo "runtime = \"$RUNTIME\""
  if [ "$(cat /proc/1/comm 2>/dev/null)" != systemd ]; then
    echo 'cgroup_manager = "cgroupfs"'
    echo 'events_logger = "file"'
  fi
} >"$CONTAINERS_CONF"
# `podman build` (buildah) sets its RUN steps' limits itself: the same limits as flags.
export ULIMIT_FLAGS="--ulimit nofile=$nofile:$nofile --ulimit nproc=$nproc:$nproc"
export PODMAN_CMD="${PODMAN[*]}"
if ! "${PODMAN[@]}" info >"$LOGS/podman-info.log" 2>&1; then
  say "podman cannot run here: the end of $LOGS/podman-info.log:"
  tail -n 10 "$LOGS/podman-info.log" | sed 's/^/  | /'
  exit 1
fi

# --- 2. the base: Debian bookworm from this machine's own mirror -----------------------------
# The sources apt uses here (one-line and deb822), their suites renamed from this machine's
# release to bookworm (…-updates, …-security kept), main only, the signed-by keyring kept.
mirrors() {
  python3 - "$SUITE" <<'PY'
import glob, re, sys
suite = sys.argv[1]
codename = ""
try:
    for line in open("/etc/os-release"):
        if line.startswith("VERSION_CODENAME="):
            codename = line.split("=", 1)[1].strip().strip('"')
except OSError:
    pass
entries = []  # (uri, suite, signed_by)
def add(types, uris, suites, comps, signed):
    if "deb" not in types or "main" not in comps:
        return
    for uri in uris:
        for s in suites:
            base, _, pocket = s.partition("-")
            if base not in (codename, suite):
                continue
            entries.append((uri, suite + ("-" + pocket if pocket else ""), signed))
for path in ["/etc/apt/sources.list", *sorted(glob.glob("/etc/apt/sources.list.d/*.list"))]:
    try:
        text = open(path).read()
    except OSError:
        continue
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        m = re.match(r"^(deb)\s+(?:\[([^\]]*)\]\s+)?(\S+)\s+(\S+)\s+(.*)$", line)
        if not m:
            continue
        opts = dict(o.split("=", 1) for o in (m.group(2) or "").split() if "=" in o)
        add({"deb"}, [m.group(3)], [m.group(4)], m.group(5).split(), opts.get("signed-by", ""))
for path in sorted(glob.glob("/etc/apt/sources.list.d/*.sources")):
    try:
        text = open(path).read()
    except OSError:
        continue
    for stanza in re.split(r"\n\s*\n", text):
        fields = {}
        for line in stanza.splitlines():
            if line.startswith("#") or ":" not in line or line[:1].isspace():
                continue
            key, value = line.split(":", 1)
            fields[key.strip().lower()] = value.strip()
        if fields.get("enabled", "yes").lower() == "no":
            continue
        add(set(fields.get("types", "").split()), fields.get("uris", "").split(),
            fields.get("suites", "").split(), fields.get("components", "").split(),
            fields.get("signed-by", ""))
seen = set()
for uri, s, signed in entries:
    if (uri, s) in seen:
        continue
    seen.add((uri, s))
    opt = f"[signed-by={signed}] " if signed.startswith("/") else ""
    print(f"deb {opt}{uri} {s} main")
PY
}
mapfile -t MIRRORS < <(mirrors)
if [ ${#MIRRORS[@]} -eq 0 ]; then
  MIRRORS=("deb http://deb.debian.org/debian $SUITE main")
fi
# The machine's apt settings that matter to a mirror: a snapshot mirror's Release files are past
# their Valid-Until, and this machine's apt is told so; mmdebstrap's apt is told the same.
APTOPTS=()
# (grep without -q: with pipefail, -q's early exit makes apt-config's SIGPIPE the answer.)
if apt-config dump 2>/dev/null | grep '^Acquire::Check-Valid-Until "false"' >/dev/null; then
  APTOPTS+=(--aptopt='Acquire::Check-Valid-Until "false"')
fi
BASE_KEY=$(printf '%s\n' "$SUITE" "$VARIANT" "$INCLUDE" "${MIRRORS[@]}" "${APTOPTS[@]}" |
  sha256sum | cut -c1-12)
BASE_IMAGE="localhost/agentsession-base:$SUITE-$BASE_KEY"
export BASE_IMAGE SUITE VARIANT INCLUDE WORK
export MIRROR_LINES="$(printf '%s\n' "${MIRRORS[@]}")"
export APTOPT_LINES="$(printf '%s\n' "${APTOPTS[@]}")"

make_base() {
  mapfile -t mirrors <<<"$MIRROR_LINES"
  aptopts=()
  while IFS= read -r line; do [ -n "$line" ] && aptopts+=("$line"); done <<<"$APTOPT_LINES"
  rm -f "$WORK/base.tar"
  # No docs, man pages or translations; the package lists dropped once installed.
  mmdebstrap --mode=root --variant="$VARIANT" --include="$INCLUDE" --format=tar \
    "${aptopts[@]}" \
    --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/doc/*' \
    --dpkgopt='path-include=/usr/share/doc/*/copyright' \
    --dpkgopt='path-exclude=/usr/share/locale/*' \
    --customize-hook='rm -rf "$1"/var/lib/apt/lists/* "$1"/var/cache/apt/*.bin' \
    "$SUITE" "$WORK/base.tar" "${mirrors[@]}"
  ls -l "$WORK/base.tar"
}
import_base() {
  # shellcheck disable=SC2086  # PODMAN_CMD is a command and its flags
  $PODMAN_CMD import \
    --change 'CMD ["/bin/bash"]' \
    --change 'LABEL org.opencontainers.image.title=agentsession-base' \
    "$WORK/base.tar" "$BASE_IMAGE"
  rm -f "$WORK/base.tar"
  # A base that cannot run Python is not kept (a re-run would reuse it).
  # shellcheck disable=SC2086
  if ! $PODMAN_CMD run --rm --network none "$BASE_IMAGE" python3 -c \
    'import sys, venv, ensurepip; print("base python", sys.version.split()[0])'; then
    $PODMAN_CMD rmi "$BASE_IMAGE" || true
    exit 1
  fi
}
if [ "$rebuild_base" = 0 ] && "${PODMAN[@]}" image exists "$BASE_IMAGE"; then
  TIMINGS+=("base 0 s (reused)")
  say "base: $BASE_IMAGE already there, reused (--rebuild-base makes it again)"
else
  say "base: mmdebstrap $SUITE ($VARIANT + $INCLUDE) from ${MIRRORS[0]#deb }${MIRRORS[1]:+ …}"
  step base "$T_BASE" make_base
  step import "$T_IMPORT" import_base
fi

# --- 3. the image --------------------------------------------------------------------------
# The build context: the files the wheel is made of (pyproject.toml's packages and
# force-include), nothing else: no .venv, no artifacts, no caches. Staged again only when a
# file changed, so that an unchanged source keeps podman's layer cache (a re-run then takes
# seconds); one timestamp and owner for every file, so that another checkout of the same
# source (CI's fresh clone) is the same context too.
CONTEXT="$WORK/context"
tar -C "$REPO" --sort=name --mtime='2020-01-01 00:00:00Z' --owner=0 --group=0 --numeric-owner \
  --exclude='__pycache__' --exclude='*.pyc' -cf "$WORK/context.tar.new" \
  pyproject.toml README.md agentsession_core local_substrate flows tasks scripts \
  deployments/presets deployments/prefect.yaml
if [ -d "$CONTEXT" ] && cmp -s "$WORK/context.tar.new" "$WORK/context.tar"; then
  rm -f "$WORK/context.tar.new"
else
  rm -rf "$CONTEXT"
  mkdir -p "$CONTEXT"
  tar -C "$CONTEXT" -xf "$WORK/context.tar.new"
  mv "$WORK/context.tar.new" "$WORK/context.tar"
fi

# The package index this machine's pip uses, as a pip.conf for the build (http(s) only: a
# file:// index or find-links directory of this machine is not in the build), and the CA
# bundle that index's certificate chains to (a TLS-inspecting proxy's, here). Both go in as
# build secrets: in no layer of the image.
HOST_PIP=("$REPO/.venv/bin/python" -m pip)
[ -x "$REPO/.venv/bin/python" ] || HOST_PIP=(python3 -m pip)
pip_get() { "${HOST_PIP[@]}" config get "$1" 2>/dev/null || true; }
only_http() { tr ' ' '\n' | grep -E '^https?://' | tr '\n' ' ' | sed 's/ $//' || true; }
index_url=$(echo "${PIP_INDEX_URL:-$(pip_get global.index-url)}" | only_http)
extra_urls=$(echo "${PIP_EXTRA_INDEX_URL:-$(pip_get global.extra-index-url)}" | only_http)
trusted=${PIP_TRUSTED_HOST:-$(pip_get global.trusted-host)}
pip_timeout=${PIP_DEFAULT_TIMEOUT:-$(pip_get global.timeout)}
PIPCONF="$WORK/pip.conf"
{
  echo "[global]"
  [ -n "$index_url" ] && echo "index-url = $index_url"
  [ -n "$extra_urls" ] && echo "extra-index-url = $extra_urls"
  [ -n "$trusted" ] && echo "trusted-host = $trusted"
  echo "timeout = ${pip_timeout:-60}"
  echo "retries = 5"
} >"$PIPCONF"
chmod 600 "$PIPCONF"
CACERT=""
for c in "${PIP_CERT:-}" "$(pip_get global.cert)" "${SSL_CERT_FILE:-}" \
  /etc/ssl/certs/ca-certificates.crt; do
  if [ -n "$c" ] && [ -s "$c" ]; then CACERT=$c; break; fi
done
BUILD_STAGE_IMAGE=${AGENTSESSION_IMAGE_BUILD_STAGE:-localhost/agentsession-build:cache}
export CONTEXT CONTAINERFILE IMAGE PIPCONF CACERT BUILD_STAGE_IMAGE
build_image() {
  secrets=(--secret "id=pipconf,src=$PIPCONF")
  [ -n "$CACERT" ] && secrets+=(--secret "id=cacert,src=$CACERT")
  # --network host: the build's pip reaches the index the way this machine does (its
  # resolver, its proxy); --pull=never: the base is local, no registry is asked.
  # shellcheck disable=SC2086
  $PODMAN_CMD build --network host --pull=never --layers $ULIMIT_FLAGS \
    --build-arg "BASE=$BASE_IMAGE" "${secrets[@]}" \
    -f "$CONTAINERFILE" -t "$IMAGE" "$CONTEXT"
  # The build stage tagged too (all cached: seconds), so that its layers (the dependencies)
  # stay referenced; then the images earlier builds of this script left untagged are removed
  # (only those: the filter is this image's and its base's label), or every re-run would
  # leave ~640 MB behind.
  # shellcheck disable=SC2086
  $PODMAN_CMD build --network host --pull=never --layers $ULIMIT_FLAGS \
    --build-arg "BASE=$BASE_IMAGE" "${secrets[@]}" --target build \
    -f "$CONTAINERFILE" -t "$BUILD_STAGE_IMAGE" "$CONTEXT" >/dev/null
  for title in agentsession agentsession-base; do
    # shellcheck disable=SC2086
    $PODMAN_CMD image prune -f --filter "label=org.opencontainers.image.title=$title" >/dev/null
  done
  # shellcheck disable=SC2086
  $PODMAN_CMD image inspect --format \
    'image {{.Id}}: {{.Size}} bytes, user {{.Config.User}}, entrypoint {{.Config.Entrypoint}}' \
    "$IMAGE"
}
say "build: $IMAGE on $BASE_IMAGE (index: ${index_url:-the default index}${extra_urls:+ + $extra_urls})"
step build "$T_BUILD" build_image
say "build: $(tail -n 1 "$LOGS/build.log")"

# --- 4. the demo campaign in the image, 5. its verdict --------------------------------------
# The host directory is the container user's (rootful podman, no user namespace: uid 10001
# here is uid 10001 there). No network: the demo's Prefect API and its substrate are on the
# container's loopback. Read-only root; /tmp (the substrate's snapshots) and the user's home
# (Prefect's database) are tmpfs. The verdict is `agentsession gate` on the run directory, in
# the image, the artifacts mounted read-only.
#
# A void verdict says the gate would not judge: the load generator itself lagged (a machine
# busy with other work), not that the substrate failed. A void demo runs once more
# (AGENTSESSION_IMAGE_DEMO_ATTEMPTS, default 2); a fail is never retried; only pass exits 0.
chown "$APP_UID:$APP_UID" "$ARTIFACTS"
NAME="agentsession-demo-$$"
export NAME ARTIFACTS APP_UID T_DEMO LOGS
cleanup() { "${PODMAN[@]}" rm -f --time 5 "$NAME" >/dev/null 2>&1 || true; }
trap cleanup EXIT
run_demo() {
  # shellcheck disable=SC2086
  $PODMAN_CMD run --rm --name "$NAME" --init --network none --timeout "$((T_DEMO - 30))" \
    --read-only \
    --tmpfs "/tmp:rw,nosuid,nodev,mode=1777" \
    --tmpfs "/home/agentsession:rw,nosuid,nodev,U" \
    --memory 6g --pids-limit 4096 \
    -e PREFECT_SERVER_ANALYTICS_ENABLED=false -e DO_NOT_TRACK=1 \
    -v "$ARTIFACTS:/artifacts:rw" \
    "$IMAGE" campaign --preset demo --set out=/artifacts \
    >"$LOGS/demo.stdout"
}
gate_run() {
  # shellcheck disable=SC2086
  $PODMAN_CMD run --rm --network none --read-only -v "$ARTIFACTS:/artifacts:ro" \
    "$IMAGE" gate "$RUN_IN_IMAGE" >"$LOGS/gate.json"
}
attempts=${AGENTSESSION_IMAGE_DEMO_ATTEMPTS:-2}
attempt=1
while :; do
  say "demo: agentsession campaign --preset demo in the image (attempt $attempt of $attempts;" \
    "load average $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) cores)"
  step "demo-$attempt" "$T_DEMO" run_demo
  RUN_IN_IMAGE=$(grep '^/artifacts/' "$LOGS/demo.stdout" | tail -n 1 || true)
  if [ -z "$RUN_IN_IMAGE" ]; then
    say "demo: no run directory printed; the end of $LOGS/demo-$attempt.log:"
    tail -n 25 "$LOGS/demo-$attempt.log" | sed 's/^/  | /'
    summary
    exit 1
  fi
  RUN_ON_HOST="$ARTIFACTS${RUN_IN_IMAGE#/artifacts}"
  say "demo: run directory $RUN_ON_HOST"
  export RUN_IN_IMAGE
  t0=$SECONDS
  gate_rc=0
  timeout --kill-after=30 "$T_GATE" bash -euo pipefail -c "$(declare -f gate_run); gate_run" \
    >"$LOGS/gate.log" 2>&1 || gate_rc=$?
  TIMINGS+=("gate-$attempt $((SECONDS - t0)) s")
  verdict=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1])).get("verdict", "?"))' \
    "$LOGS/gate.json" 2>/dev/null || echo "?")
  say "gate: $(grep -m 1 '^gate: ' "$LOGS/gate.log" || echo "exit $gate_rc, verdict $verdict")"
  if [ "$gate_rc" -eq 0 ] && [ "$verdict" = pass ]; then
    break
  fi
  if [ "$verdict" = void ] && [ "$attempt" -lt "$attempts" ]; then
    say "demo: void (the generator, not the substrate, could not be judged): once more"
    attempt=$((attempt + 1))
    continue
  fi
  summary
  say "verdict: $verdict (agentsession gate exit $gate_rc); $LOGS/gate.log ends:"
  tail -n 15 "$LOGS/gate.log" | sed 's/^/  | /'
  exit 1
done
summary
say "verdict: pass ($RUN_ON_HOST)"
