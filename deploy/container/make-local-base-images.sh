#!/usr/bin/env bash
# Makes the Dockerfile's two base images locally, for a machine that cannot pull from Docker Hub but
# reaches a Debian mirror (the development machines of this project): afterwards the unmodified
# Dockerfile builds, because the images carry the names it asks for.
#   docker.io/library/debian:bookworm-slim           debootstrap --variant=minbase bookworm (bash, coreutils, no curl)
#   docker.io/library/maven:3.9-eclipse-temurin-25   that, plus this host's Temurin 25 JDK at /opt/java/openjdk and
#                                                    Debian's maven; seeded with this host's ~/.m2 (LMCACHE_SEED_M2=0: not)
# Usage (as root, from the repository root; on a host whose cgroups or limits podman's defaults trip over,
# first: export CONTAINERS_CONF=$PWD/deploy/container/containers.conf):
#   deploy/container/make-local-base-images.sh [podman|docker]
#   podman build --network host --build-arg LMCACHE_COMMIT=$(git rev-parse HEAD) -t lmcache-server .
set -euo pipefail
engine=${1:-podman}
jdk=${JDK_HOME:-/usr/lib/jvm/temurin-25-jdk-amd64}
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
work=$(mktemp -d /var/tmp/lmcache-base.XXXXXX)
trap 'rm -rf "$work"' EXIT
command -v debootstrap >/dev/null || { echo "needs debootstrap (apt-get install debootstrap)" >&2; exit 1; }
[ -x "$jdk/bin/jlink" ] || { echo "needs a Java 25 JDK at $jdk (set JDK_HOME)" >&2; exit 1; }

if [ "${LMCACHE_REBUILD_DEBIAN:-0}" = 1 ] || ! "$engine" image exists docker.io/library/debian:bookworm-slim 2>/dev/null; then
  debootstrap --variant=minbase bookworm "$work/rootfs" "$mirror" >&2
  # a slim image's habits: no apt lists, no docs
  rm -rf "$work/rootfs"/var/lib/apt/lists/* "$work/rootfs"/usr/share/doc/* "$work/rootfs"/usr/share/man/*
  tar -C "$work/rootfs" -c . | "$engine" import --change 'CMD ["bash"]' - docker.io/library/debian:bookworm-slim
fi

mkdir -p "$work/maven/m2"
cp -a "$jdk" "$work/maven/jdk"
# this host's trust store: where HTTPS goes through an inspecting proxy, Maven in the build trusts what the host trusts
# (the JDK's own file may be a link to it, which would dangle in the image: replaced by a copy)
if [ -f /etc/ssl/certs/java/cacerts ]; then
  rm -f "$work/maven/jdk/lib/security/cacerts"
  cp -L /etc/ssl/certs/java/cacerts "$work/maven/jdk/lib/security/cacerts"
fi
if [ "${LMCACHE_SEED_M2:-1}" = 1 ] && [ -d "$HOME/.m2/repository" ]; then
  cp -a "$HOME/.m2/repository" "$work/maven/m2/repository"
fi
cat > "$work/maven/Containerfile" <<'EOS'
FROM docker.io/library/debian:bookworm-slim
RUN apt-get update && apt-get install -y --no-install-recommends maven ca-certificates && rm -rf /var/lib/apt/lists/*
COPY jdk /opt/java/openjdk
COPY m2 /root/.m2
ENV JAVA_HOME=/opt/java/openjdk PATH=/opt/java/openjdk/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
EOS
"$engine" build --network host -t docker.io/library/maven:3.9-eclipse-temurin-25 "$work/maven"
"$engine" images | grep -E 'debian|maven'
