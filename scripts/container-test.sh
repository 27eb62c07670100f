#!/usr/bin/env bash
# The sync server's container, built and run with podman, checked end to end: the image from
# sync-server/Dockerfile (runtime stage over a local Debian base, `memoria-sync` built on the
# host), a container with its store on a named volume, a token created inside it, a sync round
# trip between two homes through the real `memoria` CLI, then a restart and a recreated
# container that must still serve the same notes and token from the volume; then the same
# checks on docker-compose.yml's `sync` service. Work already done is skipped (packages, base
# image, cargo build, image layers). Exits non-zero, saying what failed, on any failure.
#
# Needs root for apt-get and debootstrap the first time; no container registry is used.
# MEMORIA_CT_PORT (default 18787) is the loopback port the containers listen on.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$HOME/.cache/memoria/target}
export CARGO_TERM_COLOR=${CARGO_TERM_COLOR:-never}
cache=${MEMORIA_TOOLS_DIR:-$HOME/.cache/memoria/tools}/container
port=${MEMORIA_CT_PORT:-18787}
base=localhost/debian:bookworm-slim
image=localhost/memoria-sync:latest
name=memoria-ct
volume=memoria-ct-data
project=memoria-ct-compose
start=$(date +%s)
step() { echo "=== $* ($(($(date +%s) - start))s)"; }
fail() {
  echo "container-test: FAILED: $*" >&2
  exit 1
}

step "podman, runc, debootstrap, podman-compose"
need=()
for tool in podman runc debootstrap podman-compose; do
  command -v "$tool" >/dev/null || need+=("$tool")
done
if ((${#need[@]})); then
  apt-get install -y "${need[@]}" >/dev/null || fail "cannot install ${need[*]} with apt-get"
fi
# crun, podman's default runtime, cannot raise RLIMIT_NOFILE without CAP_SYS_RESOURCE and
# refuses hybrid cgroups; runc with no default ulimits runs everywhere we tried.
mkdir -p "$cache"
printf '[containers]\ndefault_ulimits = []\n\n[engine]\nruntime = "runc"\n' >"$cache/containers.conf"
export CONTAINERS_CONF=$cache/containers.conf

work=$(mktemp -d)
cleanup() {
  podman rm -f -t 5 "$name" >/dev/null 2>&1 || true
  podman volume rm -f "$volume" >/dev/null 2>&1 || true
  (cd "$work" && podman-compose -p "$project" -f "$work/compose.yml" down -v >/dev/null 2>&1) || true
  rm -rf "$work"
}
trap cleanup EXIT
# What a run that was stopped half way may have left behind.
cleanup_before() {
  podman rm -f -t 5 "$name" "${project}_sync_1" >/dev/null 2>&1 || true
  podman volume rm -f "$volume" "${project}_sync-data" >/dev/null 2>&1 || true
}
cleanup_before

step "base image $base (debootstrap, once)"
if ! podman image exists "$base"; then
  rootfs=$work/rootfs
  debootstrap --variant=minbase bookworm "$rootfs" http://deb.debian.org/debian >"$work/debootstrap.log" 2>&1 ||
    fail "debootstrap failed: $(tail -5 "$work/debootstrap.log")"
  tar -C "$rootfs" -c . | podman import - "$base" >/dev/null || fail "podman import of the base image failed"
  rm -rf "$rootfs"
fi

step "memoria-sync and memoria, built on the host"
cargo build --locked -p memoria-sync-server --bin memoria-sync -p memoria-cli --bin memoria
bin=$CARGO_TARGET_DIR/debug
memoria=$bin/memoria

step "image $image (runtime stage, the host's binary)"
mkdir "$work/context"
cp "$bin/memoria-sync" "$work/context/memoria-sync"
podman build --network host --pull=never -q -f sync-server/Dockerfile \
  --build-arg BINARY=host --build-arg BASE="$base" -t "$image" "$work/context" >/dev/null ||
  fail "podman build of sync-server/Dockerfile failed"

# Waits for the server in container $1 to say it listens, then checks it answers.
wait_listening() {
  local c=$1 url=$2
  for _ in $(seq 1 60); do
    if podman logs "$c" 2>&1 | grep -q "listening on"; then
      curl -fsS -o /dev/null "$url/healthz" || fail "$c listens but $url/healthz does not answer"
      return 0
    fi
    [[ $(podman inspect -f '{{.State.Running}}' "$c" 2>/dev/null) == true ]] ||
      fail "container $c stopped: $(podman logs "$c" 2>&1 | tail -5)"
    sleep 0.5
  done
  fail "container $c did not start listening: $(podman logs "$c" 2>&1 | tail -5)"
}

# `memoria` in its own home ($1), as a person's machine would run it: no desktop keychain.
homes=$work/homes
m() {
  local home=$homes/$1
  shift
  mkdir -p "$home"
  (cd "$home" && env -u DBUS_SESSION_BUS_ADDRESS MEMORIA_HOME="$home" XDG_RUNTIME_DIR="$home" \
    "$memoria" "$@") || fail "memoria $* (home $(basename "$home")) failed"
}

# Requires note $2 with body text $3 in home $1.
has_note() {
  local out
  out=$(m "$1" --json show "$2")
  grep -qF "$3" <<<"$out" || fail "home $1 does not have note $2 with \"$3\": $out"
}

run_server() {
  podman run -d --name "$name" --network host -v "$volume:/var/lib/memoria-sync/data" \
    -e MEMORIA_SYNC_LISTEN="127.0.0.1:$port" "$image" >/dev/null ||
    fail "podman run of $image failed"
  wait_listening "$name" "$url"
}

url=http://127.0.0.1:$port
step "container $name on $url, store on volume $volume"
run_server
token=$(podman exec "$name" memoria-sync token create --user alice | grep "^msync_") ||
  fail "token create inside the container failed"
[[ $token == msync_* ]] || fail "token create inside the container printed \"$token\""

step "sync round trip between two homes through the container"
m a sync login --server "$url" --token "$token" >/dev/null
m a add --id from-a --summary "Written on a" --body "alpha body" >/dev/null
m a sync now >/dev/null
m b sync login --server "$url" --token "$token" >/dev/null
m b sync now >/dev/null
has_note b from-a "alpha body"
m b add --id from-b --summary "Written on b" --body "beta body" >/dev/null
m b sync now >/dev/null
m a sync now >/dev/null
has_note a from-b "beta body"

step "restarted container keeps the notes"
podman restart -t 10 "$name" >/dev/null || fail "podman restart failed"
wait_listening "$name" "$url"
m c sync login --server "$url" --token "$token" >/dev/null
m c sync now >/dev/null
has_note c from-a "alpha body"
has_note c from-b "beta body"

step "recreated container on the same volume keeps the notes and the token"
podman rm -f -t 10 "$name" >/dev/null || fail "podman rm failed"
run_server
m d sync login --server "$url" --token "$token" >/dev/null
m d sync now >/dev/null
has_note d from-a "alpha body"
has_note d from-b "beta body"
podman rm -f -t 10 "$name" >/dev/null
podman volume rm -f "$volume" >/dev/null

# docker-compose.yml's `sync` service, unchanged but for the loopback port it publishes. The
# `minio` profile needs the minio/minio and minio/mc images, which no registry here provides.
step "docker-compose.yml: service sync (image $image, built above)"
sed "s/\"8787:8787\"/\"127.0.0.1:$port:8787\"/" docker-compose.yml >"$work/compose.yml"
grep -q "127.0.0.1:$port:8787" "$work/compose.yml" || fail "docker-compose.yml publishes no 8787:8787"
compose() { (cd "$work" && podman-compose -p "$project" -f "$work/compose.yml" "$@"); }
compose up -d --no-build sync >"$work/compose.log" 2>&1 ||
  fail "podman-compose up failed: $(tail -5 "$work/compose.log")"
service=${project}_sync_1
wait_listening "$service" "$url"
token=$(compose exec -T sync memoria-sync token create --user bob | grep "^msync_") ||
  fail "token create in the compose service failed"
[[ $token == msync_* ]] || fail "token create in the compose service printed \"$token\""
m e sync login --server "$url" --token "$token" >/dev/null
m e add --id via-compose --summary "Through compose" --body "gamma body" >/dev/null
m e sync now >/dev/null
compose down >/dev/null 2>&1 || fail "podman-compose down failed"
compose up -d --no-build sync >"$work/compose.log" 2>&1 ||
  fail "podman-compose up (again) failed: $(tail -5 "$work/compose.log")"
wait_listening "$service" "$url"
m f sync login --server "$url" --token "$token" >/dev/null
m f sync now >/dev/null
has_note f via-compose "gamma body"

step "container test passed"
