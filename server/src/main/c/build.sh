#!/usr/bin/env bash
# Builds liblmcache_hostcopy.so (the CPU path's guarded non-temporal copies) into $1/native/linux-x86_64/, where the
# server finds it on its class path; Maven runs this in the process-classes phase (server/pom.xml). No C compiler, or not
# x86-64: says so and exits 0; the server then copies in Java (slower on hosts with many cores, see docs/internals.md).
# LMCACHE_REQUIRE_NATIVE=1 (CI) makes that a failure.
set -euo pipefail
out="$1/native/linux-x86_64"
src="$(dirname "${BASH_SOURCE[0]}")/lmcache_hostcopy.c"
cc=${CC:-cc}
why=""
if [ "$(uname -s)-$(uname -m)" != Linux-x86_64 ]; then
  why="not Linux x86-64 ($(uname -s)-$(uname -m))"
elif ! command -v "$cc" >/dev/null; then
  why="no C compiler ($cc; apt-get install gcc libc6-dev)"
fi
if [ -n "$why" ]; then
  echo "######## lmcache_hostcopy not built: $why. The server copies CPU workers' KV in Java." >&2
  [ "${LMCACHE_REQUIRE_NATIVE:-0}" = 1 ] && exit 1
  exit 0
fi
mkdir -p "$out"
# -fno-stack-protector -U_FORTIFY_SOURCE: no glibc symbols newer than the oldest hosts' (the GPU hosts run older glibc)
"$cc" -O2 -fPIC -shared -fno-stack-protector -U_FORTIFY_SOURCE -Wall -Wextra -Werror -o "$out/liblmcache_hostcopy.so.tmp" "$src"
mv -f "$out/liblmcache_hostcopy.so.tmp" "$out/liblmcache_hostcopy.so"
