#!/usr/bin/env bash
# CI's image check (.ci/run calls it after the tests): builds the Dockerfile from this checkout with podman,
# starts the image as the Kubernetes manifests run it (its own user, a read-only root with /tmp on a tmpfs,
# no capabilities, no new privileges), waits for /healthcheck, checks that it runs as a non-root user, that
# its health check, `lmcache server --help` and /commit_id work inside it, and removes it. Any failure
# exits non-zero with a banner. As root, on a host without Docker Hub: the two base images are made
# locally (make-local-base-images.sh) when missing; a re-run reuses them and podman's layer cache.
# Needs podman, runc and debootstrap (apt-get install podman runc debootstrap; .ci/run installs them).
# Environment: LMCACHE_IMAGE (default lmcache-server:<the Dockerfile's version label>),
# LMCACHE_REBUILD_BASE=1 (make the base images again), CONTAINERS_CONF (default: containers.conf beside this).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
export CONTAINERS_CONF=${CONTAINERS_CONF:-$PWD/deploy/container/containers.conf}
started=$SECONDS
log() { echo "ci-image-check [$((SECONDS - started))s]: $*" >&2; }
fail() {
  echo "######## ci-image-check FAILED: $*" >&2
  exit 1
}
for tool in podman runc debootstrap; do
  command -v "$tool" >/dev/null || fail "needs $tool (apt-get install podman runc debootstrap)"
done

version=$(sed -n 's/.*org\.opencontainers\.image\.version="\([^"]*\)".*/\1/p' Dockerfile)
[ -n "$version" ] || fail "no org.opencontainers.image.version label in the Dockerfile"
image=${LMCACHE_IMAGE:-lmcache-server:$version}
commit=$(git rev-parse HEAD 2>/dev/null || echo unknown)

if [ "${LMCACHE_REBUILD_BASE:-0}" = 1 ] || ! podman image exists docker.io/library/debian:bookworm-slim \
    || ! podman image exists docker.io/library/maven:3.9-eclipse-temurin-25; then
  log "making the two local base images (debootstrap; the maven one seeded with ~/.m2)"
  [ "${LMCACHE_REBUILD_BASE:-0}" = 1 ] && export LMCACHE_REBUILD_DEBIAN=1
  base_log=$(mktemp /tmp/lmcache-ci-base.XXXXXX)
  deploy/container/make-local-base-images.sh podman >"$base_log" 2>&1 \
    || { tail -n 40 "$base_log" >&2; fail "the local base images could not be made (the end of its log above, all of it in $base_log)"; }
  rm -f "$base_log"
else
  log "the local base images exist: kept (LMCACHE_REBUILD_BASE=1 makes them again)"
fi

log "building $image at $commit"
previous=$(podman image inspect --format '{{.Id}}' "$image" 2>/dev/null || true)
# docker format: the OCI one drops HEALTHCHECK; host network: the build's Maven reaches Maven Central as this host does
podman build --format docker --network host --build-arg LMCACHE_COMMIT="$commit" -t "$image" . >&2 \
  || fail "the image does not build (podman build above)"
# the image this one replaces, so re-runs do not pile up images (not `podman image prune`: that drops the layer cache,
# the dependency download and jlink included, which makes the next build minutes slower)
if [ -n "$previous" ] && [ "$previous" != "$(podman image inspect --format '{{.Id}}' "$image")" ]; then
  podman rmi "$previous" >/dev/null 2>&1 || true
fi
user=$(podman image inspect --format '{{.Config.User}}' "$image")
case "$user" in
  "" | root | 0 | 0:*) fail "the image's user is '$user', not a non-root user" ;;
esac

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])' 2>/dev/null \
    || echo $((20000 + RANDOM % 20000))
}
zmq_port=$(free_port)
http_port=$(free_port)
name=lmcache-ci-image-$$
cleanup() { podman rm -f -t 5 "$name" >/dev/null 2>&1 || true; }
trap cleanup EXIT
log "starting $name (ZeroMQ $zmq_port, HTTP $http_port)"
# --no-healthcheck: podman schedules the image's HEALTHCHECK with systemd timers, which this host lacks; it is run below
podman run -d --name "$name" --network host --shm-size 512m --no-healthcheck \
  --read-only --read-only-tmpfs=false --tmpfs /tmp:rw,exec,nosuid,nodev,size=256m \
  --cap-drop ALL --security-opt no-new-privileges \
  "$image" --host 127.0.0.1 --port "$zmq_port" --http-host 127.0.0.1 --http-port "$http_port" --l1-size-gb 0.25 >/dev/null \
  || fail "the image does not start (podman run)"

# the host side of the image's own check (bin/lmcache-healthcheck: bash, no curl), on the port given here
healthy() { LMCACHE_PID=none LMCACHE_HTTP_PORT=$http_port bin/lmcache-healthcheck 127.0.0.1 >/dev/null 2>&1; }
deadline=$((SECONDS + 120))
until healthy; do
  if [ "$(podman inspect --format '{{.State.Running}}' "$name" 2>/dev/null)" != true ]; then
    podman logs "$name" >&2 || true
    fail "the container exited before /healthcheck answered (its log above)"
  fi
  if [ $SECONDS -ge $deadline ]; then
    podman logs "$name" >&2 || true
    fail "/healthcheck did not answer 200 within 120 s (the container's log above)"
  fi
  sleep 1
done
log "/healthcheck answers 200"

uid=$(podman exec "$name" id -u) || fail "podman exec id -u"
[ "$uid" != 0 ] || fail "the server runs as root inside the image"
podman exec "$name" /opt/lmcache-server/bin/lmcache-healthcheck >/dev/null || fail "the image's HEALTHCHECK command fails inside it"
help=$(podman exec "$name" lmcache server --help 2>&1) || { echo "$help" >&2; fail "lmcache server --help fails inside the image"; }
grep -q -- '--l1-size-gb' <<<"$help" || { echo "$help" >&2; fail "lmcache server --help does not list --l1-size-gb"; }
# /commit_id: the build argument reached the jar
exec 3<>"/dev/tcp/127.0.0.1/$http_port" || fail "cannot connect to 127.0.0.1:$http_port"
printf 'GET /commit_id HTTP/1.0\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n' >&3
reply=$(cat <&3)
exec 3<&-
grep -q "\"$commit\"" <<<"$reply" || fail "/commit_id is not $commit: $reply"
# the ahead-of-time cache trained in the build stage matches the image's runtime and jar: the JVM mapped it
exec 3<>"/dev/tcp/127.0.0.1/$http_port" || fail "cannot connect to 127.0.0.1:$http_port"
printf 'GET /status HTTP/1.0\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n' >&3
reply=$(cat <&3)
exec 3<&-
grep -qE '"aot_cache" *: *\{[^}]*"used" *: *true' <<<"$reply" \
  || fail "/status says the image's AOT cache was not used: $(grep -oE '"aot_cache" *: *\{[^}]*\}' <<<"$reply")"
log "runs as uid $uid (image user $user), lmcache server --help works, /commit_id is $commit, the AOT cache is used"

podman rm -f -t 10 "$name" >/dev/null || fail "podman rm $name"
trap - EXIT
! podman ps -a --format '{{.Names}}' | grep -qx "$name" || fail "$name is still there after podman rm"
log "passed: $image built, started and removed"
