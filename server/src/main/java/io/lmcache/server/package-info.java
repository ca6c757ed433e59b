/**
 * The lmcache-server: {@link io.lmcache.server.Main} parses the command line and
 * {@link io.lmcache.server.LmcacheServer} wires the parts and closes them in reverse order of
 * construction ({@code agent.CloseHelper}: one failing close never skips the rest).
 *
 * <h2>Thread map</h2>
 *
 * Platform threads of this module are made by {@code agent.NamedThreads} (the only {@code new Thread} in
 * it), so each has a readable name in logs and dumps; the {@code cuda} module, which cannot see
 * {@code agent}, names its one kind with {@code Thread.ofPlatform} ({@code cuda.PinSchedule}); the
 * HTTP handlers are the one set of virtual threads ({@code Thread.ofVirtual} in {@code http.HttpApi}).
 * Libraries start threads of their own, listed too: JeroMQ (per ZeroMQ context), the JDK's HTTP server
 * and the virtual threads' scheduler; the L2 adapters' libraries (Lettuce, the S3 client) get a
 * {@code NamedThreads} factory. Background loops are agents ({@code agent.Agent}) run by an
 * {@code agent.AgentRunner}: stopped by flag, unpark and a bounded join, never by
 * {@code Thread.interrupt}. A lambda or method reference handed to another thread carries a
 * {@code // runs on: <thread>} comment where it is made. Listed in the order the server closes
 * them (the reverse of construction), then the one-shot and library threads.
 *
 * <p>The first column names each kind exactly ({@code N}, {@code I}: a number; {@code TYPE}: an L2 adapter type;
 * {@code DEVICE}: a device name): {@code ThreadMapTest} starts a server and checks both ways that its threads and this
 * column agree, so a new thread kind lands here.
 *
 * <table>
 * <caption>Threads, what they run, own and touch, and how they stop</caption>
 * <tr><th>Thread</th><th>Runs</th><th>Owns</th><th>May touch</th><th>Stops</th></tr>
 * <tr><td>{@code main}</td><td>start-up: config, {@code LmcacheServer.start}, then waits for the close</td>
 *     <td>nothing after start-up</td><td>everything, before other threads start</td>
 *     <td>returns after {@code close} finished</td></tr>
 * <tr><td>{@code lmcache-kv-events}</td><td>{@code events.KvEventStreams}: the
 *     KV-event subscriptions (SUBSCRIBE_KV_EVENTS), each stream's batches from the log, its lingering end</td>
 *     <td>the open streams and their cursors</td><td>the KV-event log (reads only), the reply queue and its wake-up</td>
 *     <td>flag and unpark, bounded join; closed first, before the request loop drains, so every stream's final reply goes
 *     out</td></tr>
 * <tr><td>{@code lmcache-request-loop} (not a daemon)</td><td>{@code loop.RequestLoop}: receive, decode, dispatch through the op
 *     table; SYNC handlers (PING, GET_CHUNK_SIZE, engine-driven REGISTER/UNREGISTER_KV_CACHE_ENGINE_DRIVEN_CONTEXT)
 *     and small QUICK ones (the lookup family) inline; sends every reply</td>
 *     <td>the ROUTER socket and the ZeroMQ context (the only thread that touches them)</td>
 *     <td>the dispatcher, the reply queue, {@code peer.PeerConnections}; never a driver call or a native close</td>
 *     <td>closed right after lmcache-kv-events ({@code shutdown}: stop accepting, answer what is in flight, 100 ms receive timeout);
 *     closes the context last</td></tr>
 * <tr><td>{@code lmcache-connection-monitor}</td><td>{@code loop.ConnectionMonitor}: closes ZeroMQ connections that stall
 *     (its accept/close events run on JeroMQ's I/O thread, the ROUTER's event hook)</td>
 *     <td>nothing of ZeroMQ's</td><td>its table of open connections (concurrent), {@code peer.PeerConnections} (thread-safe)</td>
 *     <td>flag and an unpark of its 250 ms park; joined by the request loop before the context closes</td></tr>
 * <tr><td>{@code lmcache-health-probe}</td><td>{@code loop.LoopbackProbe}: a PING a second through the ROUTER over TCP, for
 *     the health check</td>
 *     <td>its DEALER and that socket's own ZeroMQ context</td><td>nothing else (the health check reads one volatile)</td>
 *     <td>flag and 100 ms receive timeout; closed by the request loop as it stops</td></tr>
 * <tr><td>{@code lmcache-http-N} (virtual, carried by the JDK's
 *     {@code ForkJoinPool-N-worker-N}, with its {@code VirtualThread-unblocker}); the JDK HTTP server's {@code HTTP-Dispatcher}
 *     and {@code idle-timeout-task}, one each per listener</td><td>{@code http.HttpApi} routes (API and Prometheus
 *     listeners), metric scrapes and resets</td>
 *     <td>nothing long-lived</td><td>status reads, counters and O(1) gauges, /cache/clear through the store's lock</td>
 *     <td>{@code HttpApi.close}, after the request loop</td></tr>
 * <tr><td>{@code lmcache-l2} (only with {@code --l2-adapter})</td><td>one {@code agent.CompositeAgent}: {@code tier.StoreController}
 *     (write-through of committed L1 objects) and {@code tier.PrefetchController} (LOOKUP's L2 lookups and loads), woken by
 *     the adapters' completion signals and by commits and LOOKUPs</td>
 *     <td>the controllers' task maps and prefetch requests</td><td>the object store (its lock, through {@code storage.ObjectStore}'s named operations),
 *     the pool's bytes it reserved or holds, the adapters (non-blocking submits and queries), leases and prefetch results
 *     through the LOOKUP's completion</td>
 *     <td>{@code tier.L2Tier.close}: flag, unpark and a 5 s join, after housekeeping and before the adapters close</td></tr>
 * <tr><td>{@code lmcache-l2-TYPE-I-N}</td><td>adapter I's own I/O workers ({@code l2.FsNativeIo}: {@code num_workers} writers
 *     and a read pool of {@code read_io_depth} for lookups and loads: one file write, read or stat per job; and fs_native's
 *     one-off start-up scan of the files earlier runs left; {@code l2.redis.RedisIo}: Lettuce's event loops (2 to 4:
 *     encode a SET from L1, decode a GET into L1, complete commands), its computation pool (2) and timer, and one scheduler
 *     (connects, backstop timeouts, node probes)</td>
 *     <td>the file handles of the job in hand</td><td>the L1 pool bytes of the task's buffers (held by the controllers until the
 *     result is taken); the adapter's result queues, lock counts and usage accounting</td>
 *     <td>the adapter's close: executor shutdown, 10 s wait; the scan stops at a flag, 5 s join</td></tr>
 * <tr><td>{@code lmcache-housekeeping}</td><td>one {@code agent.CompositeAgent} ({@code agent.Housekeeping}):
 *     {@code storage.EvictionController} (expiry, the lease/prefetch/engine-driven sweeps,
 *     the rate-limited logs' "suppressed N" summaries, watermark eviction),
 *     {@code ActivityLog}, {@code liveness.Reaper} (the worker reaper), the release watchdog
 *     ({@code liveness.ReleaseThread.doWork}), {@code loop.LaneStallWatch} (the transfer lanes' deadline: reads their running
 *     tasks, answers a stalled registration through the dispatcher) and,
 *     with an evicting L2 adapter, {@code tier.L2EvictionController}</td>
 *     <td>the agents' deadlines</td><td>the object store, leases, prefetch results, modules (under their locks);
 *     the end-of-life queue (enqueue only); metrics</td>
 *     <td>after the HTTP servers and before the dispatcher and the modules it sweeps and reaps (5 s bounded join)</td></tr>
 * <tr><td>{@code lmcache-normal-N}</td><td>NORMAL and large QUICK handlers (the dispatcher's CPU pool): CLEAR,
 *     WAIT_PREFETCH_STATUS, engine-driven PREPARE/COMMIT</td>
 *     <td>nothing long-lived</td><td>modules and the object store under their locks; the reply queue and its wake-up</td>
 *     <td>{@code Dispatcher.close}: executor shutdown, 5 s wait</td></tr>
 * <tr><td>{@code lmcache-transfer-N}</td><td>AFFINITY handlers, one lane per peer in order
 *     ({@code loop.KeyedSerialExecutor}): REGISTER_KV_CACHE, UNREGISTER_KV_CACHE (opening CUDA IPC handles can block in the
 *     driver), STORE, RETRIEVE; host-path copy completions. A thread left in a stalled registration is abandoned and
 *     replaced (at most 4 at once); it leaves when its call returns</td>
 *     <td>nothing long-lived</td><td>the pool memory it reserved, a worker's tensors through its copy path, a device's
 *     copy engine (lane lock), the CUDA event poller's pending list; the end-of-life queue (enqueue only)</td>
 *     <td>as lmcache-normal-N</td></tr>
 * <tr><td>{@code lmcache-background-N}</td><td>BACKGROUND handlers (one thread): POLL_KV_EVENTS, which may wait for records</td>
 *     <td>nothing long-lived</td><td>the KV-event log (reads only); the reply queue and its wake-up</td>
 *     <td>as lmcache-normal-N</td></tr>
 * <tr><td>{@code lmcache-copy-N}</td><td>{@code transfer.HostCopies}: runs of CPU STORE/RETRIEVE copies</td><td>-</td>
 *     <td>shm, pool</td><td>close: 5 s join</td></tr>
 * <tr><td>{@code lmcache-release-N}</td><td>{@code liveness.ReleaseThread}'s worker: serves the end-of-life queue that
 *     UNREGISTER, the reaper and the last returned lease feed, in order ({@code CopyPath.close}: shm unmap,
 *     CUDA IPC close); a failed release is retried with backoff</td>
 *     <td>the release in hand</td><td>the copy path being closed: the only place native mappings are closed (a
 *     failed REGISTER's half-open CUDA mappings too), except on the closing thread after {@code ReleaseThread.close}</td>
 *     <td>a release past its timeout is abandoned by the watchdog: that thread leaves when (if ever) its
 *     release returns, and a replacement lmcache-release-(N+1) serves the rest (at most 4 abandoned at once);
 *     {@code ReleaseThread.close} (after the modules and the drain of the GPU transfers in flight, before the GPU
 *     backend) serves what is queued, bounded, then runs what is left and every later release on the closing
 *     thread</td></tr>
 * <tr><td>{@code lmcache-cuda-events} (CUDA only)</td><td>{@code agent.CudaEventsAgent}: {@code cuda.EventPoller.doWork}
 *     queries events, runs CUDA transfer completions, destroys retired events</td>
 *     <td>the retiring events</td><td>what completions touch: publish or unpin objects, give the instance lease back
 *     (whose last return only enqueues the release); completions are short and never block</td>
 *     <td>closed after {@code GpuBackend.close}, which drains what is left on the closing thread</td></tr>
 * <tr><td>{@code lmcache-pool-prepare-N}</td><td>{@code storage.PoolPreparation}: one pass prefaulting (and pinning) regions</td>
 *     <td>the region in hand</td><td>the store's ready regions, the GPU backend's pinned pool</td>
 *     <td>closing flag after the region in hand (joined at most 30 s, before the GPU backend closes); ends by
 *     itself when done</td></tr>
 * <tr><td>{@code lmcache-pool-pin-N} (CUDA only)</td><td>{@code cuda.PinSchedule}: pins ({@code cuMemHostRegister}) the
 *     pool regions recorded before the GPU backend came up, so a first STORE finds its region pinned</td>
 *     <td>the region in hand</td><td>the schedule's list of regions (under its lock)</td>
 *     <td>one-shot: ends after the last recorded region, or at the schedule's stop (GPU backend close)</td></tr>
 * <tr><td>{@code lmcache-numa-probe} (only with NUMA placement)</td><td>{@code storage.NumaPlacement}: tries a thread
 *     binding on a thread of its own, so the starting thread keeps its CPUs</td><td>nothing</td><td>nothing</td>
 *     <td>one-shot, joined at once</td></tr>
 * <tr><td>{@code lmcache-gpu-warmup-DEVICE}, {@code lmcache-gpu-warmup-pin-N} (CUDA only)</td><td>{@code warmup.GpuWarmups}:
 *     at a GPU's first REGISTER, beside its reply, STOREs from the worker's KV into scratch memory and RETRIEVEs into scratch
 *     device memory through the CUDA copy path; its pin thread ({@code warmup.GpuScratchWarmup}) pins the pool regions the
 *     first STOREs use</td><td>the scratch memory</td><td>the copy path of the registering worker (read only, under a lease on
 *     its registration), the GPU backend's pin call</td><td>one-shot: ends at its budget ({@code --gpu-warmup-budget-ms}) or
 *     at a worker's first transfer on the device, joined at most until then</td></tr>
 * <tr><td>{@code lmcache-lookup-hashes} (only with {@code --lookup-hash-log-dir})</td><td>{@code diag.LookupHashWriter}: hashes
 *     the queued LOOKUPs' chunks and writes their JSON lines, rotating the files</td><td>the log directory's files</td>
 *     <td>{@code diag.LookupHashLog}'s bounded queue, the registered shapes</td><td>its runner's close, after writing what is
 *     queued</td></tr>
 * <tr><td>{@code lmcache-test-completions} (only with {@code --test-hooks})</td><td>{@code transfer.CompletionDelay}: host
 *     copies' completions, delayed as a GPU's are</td><td>nothing</td><td>what a completion touches (commit, abort,
 *     unpin)</td><td>executor shutdown with the transfer modules</td></tr>
 * <tr><td>{@code lmcache-normal-N}, {@code lmcache-transfer-N}, {@code lmcache-release-N} of a warm-up</td><td>the
 *     dispatcher and release thread of {@code warmup.ScratchServer}'s own parts ({@code ServerParts.SCRATCH}): the JIT
 *     warm-up's requests, on the starting thread's behalf, and its scratch worker's release</td><td>nothing shared</td><td>the
 *     scratch server's store, modules and reply queue only</td><td>closed with the scratch server's parts (5 s bounded),
 *     before the server's own parts start</td></tr>
 * <tr><td>{@code lmcache-warmup-loop}, and its connection monitor, health probe and JeroMQ threads</td><td>the scratch
 *     server's own {@code loop.RequestLoop} on a free loopback port (in-process after ready), which the second half of the
 *     warm-up's requests (the last nine tenths where rounds may go on in the background) reach from a DEALER on the
 *     starting thread, then on lmcache-warmup (so the ZeroMQ path is compiled too)</td><td>its own
 *     ROUTER and ZeroMQ context</td><td>the scratch dispatcher and reply queue only</td><td>shut down by the warm-up before
 *     the scratch dispatcher closes</td></tr>
 * <tr><td>{@code lmcache-warmup} (one-shot daemon)</td><td>{@code warmup.Warmup}: the start-up warm-up's rounds left over at
 *     {@code ready}, through the scratch request loop, until done, {@code --warmup-background-ms} or the server's first
 *     request</td><td>nothing shared</td><td>the scratch server only, which it closes as it ends</td><td>a stop flag set by
 *     the request loop's first peer message or by {@code LmcacheServer.close} (closed first, joined at most 2 s); the
 *     round in hand abandons its wait</td></tr>
 * <tr><td>{@code lmcache-shutdown}</td><td>the JVM shutdown hook: {@code LmcacheServer.close}</td>
 *     <td>the close order</td><td>every part's close</td><td>returns when the close is done</td></tr>
 * <tr><td>{@code lmcache-stop-on-failure} (not a daemon), {@code lmcache-shutdown-on-failure}</td><td>{@code Main}: after the ZeroMQ side
 *     died ({@code loop.TransportDeaths}), the first runs the second's {@code LmcacheServer.close} for at most 15 s</td>
 *     <td>nothing</td><td>every part's close</td><td>halts the JVM with exit code 3</td></tr>
 * <tr><td>{@code iothread-N}, {@code reaper-N} (JeroMQ's, a pair per ZeroMQ context: the request loop's and the
 *     health probe's)</td><td>the ZMTP I/O of the context's sockets; the closing of its sockets</td>
 *     <td>JeroMQ's pipes</td><td>the ROUTER's event hook ({@code loop.ConnectionMonitor}'s accept/close events)</td>
 *     <td>when their context closes</td></tr>
 * </table>
 */
package io.lmcache.server;
