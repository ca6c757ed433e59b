#!/usr/bin/env bash
# GPU tests and benchmark on the CUDA host. From the repository root, on this machine:
#   testclient/gpu/prepare.sh
# then on the device (the device tool's run, carrying .device):
#   bash testclient/gpu/run-on-device.sh [test|isolated|layerwise|sglang|bench|memory|kvevents|cpucopy|fresh|qwen|all]
# layerwise (also part of test): layerwise_check.py, issue 47's layer-wise mode (--layerwise-batch; layerwise_tests.json).
# sglang (also part of test): sglang_check.py, issue 47's SGLang-shaped CUDA pools on two TP ranks (sglang_tests.json).
# isolated (also part of test): isolated_ipc_check.py, issue 47's isolated-IPC and VMM tests (isolated_ipc_tests.json).
# Results land in $OUT (gpu_tests.json, gpu_bench-*.json, kernel_probe.json, the server logs; after a failed test step the
# tails of the server logs in failed-step-logs.txt).
# kvevents (issue 28; not part of all): the Java benchmarks KvEventStoreBench (STORE round trips with 0 and 8
# subscribe_kv_events subscribers, alternating in every round) and RequestLatencyBench (PING/LOOKUP against the server and
# a bare JeroMQ echo; --subscribers 8: every server case also with 8 acking subscribers in a python3 child process while a
# feeder STOREs 500/s during both server variants), on .device/jre with '.device/lib/*'; both write their sections into
# $OUT/bench-results.md (logs kv_event_store_bench.log, request_latency_bench.log). LMCACHE_KV_EVENTS_ARGS /
# LMCACHE_LATENCY_ARGS replace their arguments; LMCACHE_BENCH_SOURCE names the commit measured (no .git travels). Each takes
# a few minutes with the defaults below (RequestLatencyBench: 2 rounds x 2 requests x 2 client counts x 3 measurements
# (echo, server, server with 8 subscribers) x (2 + 4) s, ~2.5 min without repeats and at most twice that: with 3 rounds of
# (3 + 5) s and 3 attempts it ran past a 270 s limit on the H200 in round 2).
# The one-in-flight sweep with and without 8 live subscribers, and the Qwen-like hybrid (issue 30), are inflight_bench.py:
#   python3 testclient/gpu/inflight_bench.py --java .device/jre/bin/java --classpath '.device/lib/*' --repeats 20 \
#     --chunks 1,4,16,64 --warmup 1500 --subscribers 0,8 --out $OUT/inflight-subs
#   python3 testclient/gpu/inflight_bench.py --java .device/jre/bin/java --classpath '.device/lib/*' --repeats 20 \
#     --chunks 1,4,16,64 --warmup 1500 --model qwen-like --out $OUT/inflight-qwen
# LMCACHE_BUILD_PTX=1 first regenerates the copy kernel's PTX with the host's nvcc (into
# $OUT/ptx/..., ahead of the jars on the classpath) so a kernel change is tested before the PTX
# is committed: copy $OUT/ptx/io/lmcache/server/cuda/copy_pieces.ptx into
# cuda/src/main/resources/io/lmcache/server/cuda/ afterwards.
set -uo pipefail
mode=${1:-all}
out=${OUT:-/tmp/lmcache-gpu-out}
mkdir -p "$out"
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,uuid,driver_version,memory.total --format=csv | tee "$out/nvidia-smi.txt"
df -h /dev/shm | tail -1
java=.device/jre/bin/java
# LMCACHE_DEVICE_CLASSPATH replaces the jars' classpath (an A/B: an older build's jars ahead of .device/lib)
cp=${LMCACHE_DEVICE_CLASSPATH:-'.device/lib/*'}
if [ "${LMCACHE_BUILD_PTX:-0}" = 1 ]; then
  ptx_dir="$out/ptx/io/lmcache/server/cuda"
  mkdir -p "$ptx_dir"
  nvcc --version | tail -2
  nvcc -ptx -arch=compute_80 -O3 -o "$ptx_dir/copy_pieces.ptx" cuda/src/main/cuda/copy_pieces.cu || exit 1
  nvcc -cubin -arch=sm_90 -O3 -Xptxas -v -o /tmp/copy_pieces.cubin cuda/src/main/cuda/copy_pieces.cu 2>&1 | tail -3
  cp "$ptx_dir/copy_pieces.ptx" "$out/copy_pieces.ptx" # the tool brings back shallow files only
  cp="$out/ptx:$cp"
fi
rc=0
# The tails of the servers' logs after a failed step, in a file callers keep: a GPU call's script usually drops
# *server*.log to stay within what comes back, and on 2026-12-08 that left a failure without its cause.
keep_server_log_tails() {
  local f
  for f in "$out"/server-*.log; do
    [ -f "$f" ] && { echo "== $f ($1)"; tail -n 400 "$f"; }
  done >> "$out/failed-step-logs.txt"
}
if [ "$mode" = test ] || [ "$mode" = all ]; then
  python3 testclient/gpu/gpu_check.py test --java "$java" --classpath "$cp" --out "$out" 2>&1 | tee "$out/gpu_tests.log"
  rc=${PIPESTATUS[0]}
  [ "$rc" = 0 ] || keep_server_log_tails gpu_check
fi
if [ "$mode" = test ] || [ "$mode" = all ] || [ "$mode" = isolated ]; then
  # issue 47: isolated IPC (timeline-semaphore events, the §2.6 ordering test) and VMM (cuMem) registration and release
  python3 testclient/gpu/isolated_ipc_check.py --java "$java" --classpath "$cp" --out "$out" 2>&1 | tee "$out/isolated_ipc_tests.log"
  [ "${PIPESTATUS[0]}" = 0 ] || { rc=1; keep_server_log_tails isolated; }
fi
if [ "$mode" = test ] || [ "$mode" = all ] || [ "$mode" = layerwise ]; then
  # issue 47: LMCache's layer-wise mode, a worker waiting on each layer batch's pooled event
  python3 testclient/gpu/layerwise_check.py --java "$java" --classpath "$cp" --out "$out" 2>&1 | tee "$out/layerwise_tests.log"
  [ "${PIPESTATUS[0]}" = 0 ] || { rc=1; keep_server_log_tails layerwise; }
fi
if [ "$mode" = test ] || [ "$mode" = all ] || [ "$mode" = sglang ]; then
  # issue 47: SGLang's MP connector with its own pools (K then V per layer, page 0 the padding page) on two TP ranks
  python3 testclient/gpu/sglang_check.py --java "$java" --classpath "$cp" --out "$out" 2>&1 | tee "$out/sglang_tests.log"
  [ "${PIPESTATUS[0]}" = 0 ] || { rc=1; keep_server_log_tails sglang; }
fi
if [ "$mode" = bench ] || [ "$mode" = all ]; then
  python3 testclient/gpu/gpu_check.py bench --java "$java" --classpath "$cp" --out "$out" 2>&1 | tee "$out/gpu_bench.log" || rc=1
  # the copy kernel alone against DMA (why the PCIe side is left to the copy engines); needs cupy
  if python3 -c "import cupy" 2>/dev/null; then
    python3 testclient/gpu/kernel_probe.py > "$out/kernel_probe.json" || rc=1
  else
    echo "kernel probe skipped: cupy is not installed on this host" | tee "$out/kernel_probe.json"
  fi
fi
if [ "$mode" = memory ] || [ "$mode" = all ]; then
  # issue 32: device memory before and after the first REGISTER, and the pool's NUMA placement
  python3 testclient/gpu/device_memory_check.py --java "$java" --classpath "$cp" --out "$out" \
    --variant 'driverstack=-Dlmcache.cuda.stackLimitBytes=0' --variant 'staging1=-Dlmcache.cuda.stagingMiB=1' 2>&1 | tee "$out/device_memory.log"
  [ "${PIPESTATUS[0]}" = 0 ] || rc=1
fi
if [ "$mode" = kvevents ]; then
  export LMCACHE_BENCH_SOURCE=${LMCACHE_BENCH_SOURCE:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}
  # Both start servers with `java -jar server/target/lmcache-server.jar`, whose manifest names lib/<dependency>.jar beside
  # it: KvEventStoreBench through ServerProcess (-Dlmcache.server.jar, the benchmark's own java), RequestLatencyBench through
  # bin/lmcache-server ($JAVA_HOME/bin/java; it rebuilds unless the jar is newer than every source, hence the touch after
  # the checkout). The staged jars are laid out there (build outputs are not carried).
  mkdir -p server/target/lib && cp .device/lib/*.jar server/target/lib/ && cp .device/lib/lmcache-server.jar server/target/ \
    && touch server/target/lmcache-server.jar
  "$java" --enable-native-access=ALL-UNNAMED --sun-misc-unsafe-memory-access=allow -Xmx1g -Dlmcache.server.jar=server/target/lmcache-server.jar \
    -cp "$cp" io.lmcache.bench.events.KvEventStoreBench ${LMCACHE_KV_EVENTS_ARGS:---stores 2000 --warmup 500 --rounds 3 --subscribers 8} \
    --results "$out/bench-results.md" 2>&1 | tee "$out/kv_event_store_bench.log"
  [ "${PIPESTATUS[0]}" = 0 ] || rc=1
  JAVA_HOME=$PWD/.device/jre "$java" --enable-native-access=ALL-UNNAMED --sun-misc-unsafe-memory-access=allow -Xms256m -Xmx1g -cp "$cp" \
    io.lmcache.bench.latency.RequestLatencyBench ${LMCACHE_LATENCY_ARGS:---warmup-s 2 --duration-s 4 --rounds 2 --attempts 2 --clients 1,16 --subscribers 8} \
    --results "$out/bench-results.md" 2>&1 \
    | tee "$out/request_latency_bench.log"
  [ "${PIPESTATUS[0]}" = 0 ] || rc=1
fi
if [ "$mode" = cpucopy ]; then
  # issue 52: the CPU (shared-memory) path against plain copies on this host's CPUs (CpuCopyBench, Java only): one worker
  # against one thread's copy, 4 workers at once against a copy over every core, servers with --cpu-copy-threads auto and 1
  # (before issue 52) in turn; $OUT/cpu-copy/cpu-copy.md and cpu-copy-rounds.csv. LMCACHE_CPU_COPY_ARGS replaces the arguments.
  export LMCACHE_BENCH_SOURCE=${LMCACHE_BENCH_SOURCE:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}
  mkdir -p server/target/lib && cp .device/lib/*.jar server/target/lib/ && cp .device/lib/lmcache-server.jar server/target/ \
    && touch server/target/lmcache-server.jar
  "$java" --enable-native-access=ALL-UNNAMED --sun-misc-unsafe-memory-access=allow -Xmx2g -Dlmcache.server.jar=server/target/lmcache-server.jar \
    -cp "$cp" io.lmcache.bench.copy.CpuCopyBench ${LMCACHE_CPU_COPY_ARGS:---rounds 20 --warmup 5 --workers 4 --copy-threads auto,1 --l1-size-gb 3} \
    --out "$out/cpu-copy" 2>&1 | tee "$out/cpu_copy_bench.log"
  [ "${PIPESTATUS[0]}" = 0 ] || rc=1
  cp "$out"/cpu-copy/* "$out"/ 2>/dev/null || true # the tool brings back shallow files only
fi
if [ "$mode" = fresh ]; then
  # issue 52: fresh ÷ warm one in flight with the worker registering the moment the fresh server is ready (--fresh-idle-s 0,
  # no model load between; --fresh-connect ready: GET /healthcheck answers 200, the rest of the pool still being prefaulted)
  # and sending its first STORE right after the REGISTER reply. LMCACHE_FRESH_ARGS replaces the sweep's arguments; every fresh server's /status
  # jit_warmup (the GPU warm-up's state, rounds, yields) is in the log. LMCACHE_SERVER_ARGS (gpu_check.Server) adds server
  # flags, e.g. '--gpu-warmup-register-wait-ms 1500' (the REGISTER reply waits for the warm-up, as before issue 52) for the A/B.
  # the GPU's power state and clocks every 250 ms beside the sweep (its log has each fresh cell's wall-clock bounds): in a
  # sweep's first cell the SM clock rose from idle only 0.1-0.3 s into it (bench/journal/2026-12-07-pool-preparation-beside-requests.md)
  nvidia-smi --query-gpu=timestamp,pstate,clocks.sm,clocks.mem,power.draw,utilization.gpu --format=csv -lms 250 \
    > "$out/gpu-clocks.csv" 2>&1 &
  clocks_pid=$!
  # the pool's preparation (prefault, pinning) beside a fresh cell's first requests
  # (bench/journal/2026-12-07-pool-preparation-beside-requests.md): the host's CPU and page cache every second, and whether
  # /dev/shm and anonymous memory get huge pages here (what sets the preparation's rate)
  { grep -H . /sys/kernel/mm/transparent_hugepage/enabled /sys/kernel/mm/transparent_hugepage/shmem_enabled; grep ' /dev/shm ' /proc/mounts; } \
    > "$out/host-memory.txt" 2>&1
  vmstat_pid=
  if command -v vmstat > /dev/null; then
    vmstat -t 1 > "$out/vmstat.txt" 2>&1 &
    vmstat_pid=$!
  fi
  python3 testclient/gpu/inflight_bench.py --java "$java" --classpath "$cp" ${LMCACHE_FRESH_ARGS:---repeats 20 --chunks 1,4,16,64 \
    --warmup 1500 --fresh-requests 100 --scattered --fresh-idle-s 0} --out "$out/inflight-fresh" 2>&1 | tee "$out/inflight_fresh.log"
  [ "${PIPESTATUS[0]}" = 0 ] || rc=1
  kill "$clocks_pid" $vmstat_pid 2>/dev/null
fi
if [ "$mode" = qwen ]; then
  # issue 52: the Qwen-like (Mamba/GDN) hybrid one in flight at 4 and 64 chunks against its raw copy and floor (bench/RESULTS.md
  # #gpu-hybrid-models), then the plain model in the same call. LMCACHE_QWEN_ARGS replaces the arguments.
  for model in qwen-like plain; do
    python3 testclient/gpu/inflight_bench.py --java "$java" --classpath "$cp" --aot-cache none --pattern consecutive --lookup-first \
      ${LMCACHE_QWEN_ARGS:---repeats 10 --chunks 4,64 --warmup 600} --model "$model" --out "$out/inflight-$model" 2>&1 \
      | tee "$out/inflight_$model.log"
    [ "${PIPESTATUS[0]}" = 0 ] || rc=1
  done
fi
exit $rc
