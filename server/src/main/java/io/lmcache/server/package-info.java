/**
 * The lmcache-server: {@link io.lmcache.server.Main} parses the command line and
import io.lmcache.server.agent.NamedThreads;
import io.lmcache.server.loop.ConnectionMonitor;
import io.lmcache.server.loop.PeerConnections;
 * {@link io.lmcache.server.LmcacheServer} wires the parts and stops them in reverse.
 *
 * <h2>Thread map</h2>
 *
 * Every platform thread is made by {@code loop.NamedThreads} (the only {@code new Thread} in the
 * code base), so each has a readable name in logs and dumps. Background loops are agents
 * ({@code agent.Agent}) run by an {@code agent.AgentRunner}: stopped by flag, unpark and a bounded
 * join, never by {@code Thread.interrupt}. A lambda or method reference handed to another thread
 * carries a {@code // runs on: <thread>} comment where it is made.
 *
 * <table>
 * <caption>Threads, what they own and touch, and how they stop</caption>
 * <tr><th>Thread</th><th>Runs</th><th>Owns</th><th>May touch</th><th>Stops</th></tr>
 * <tr><td>main</td><td>start-up: config, {@code LmcacheServer.start}, then waits for the close</td>
 *     <td>nothing after start-up</td><td>everything, before other threads start</td>
 *     <td>returns after {@code close} finished</td></tr>
 * <tr><td>lmcache-request-loop (not a daemon)</td><td>{@code loop.RequestLoop}: receive, decode, dispatch;
 *     SYNC and small QUICK handlers inline; sends every reply</td>
 *     <td>the ROUTER socket and the ZeroMQ context (the only thread that touches them)</td>
 *     <td>the dispatcher, the reply queue, {@code PeerConnections}</td>
 *     <td>accepting/running flags and the 100 ms receive timeout; closes the context last</td></tr>
 * <tr><td>lmcache-connection-monitor</td><td>{@code liveness.ConnectionMonitor}: ROUTER accept/close events</td>
 *     <td>the monitor PAIR socket</td><td>{@code PeerConnections} (thread-safe)</td>
 *     <td>flag and 200 ms receive timeout; joined by the request loop before the context closes</td></tr>
 * <tr><td>lmcache-normal-N</td><td>NORMAL and large QUICK handlers (the dispatcher's CPU pool)</td>
 *     <td>nothing long-lived</td><td>modules and the object store under their locks; the reply queue and its wake-up</td>
 *     <td>{@code Dispatcher.close}: drain, then executor shutdown</td></tr>
 * <tr><td>lmcache-transfer-N</td><td>STORE/RETRIEVE, one lane per peer in order ({@code loop.KeyedSerialExecutor})</td>
 *     <td>nothing long-lived</td><td>the pool memory it reserved, a worker's tensors, a device's copy engine
 *     (lane lock), the CUDA event poller's pending list</td><td>as lmcache-normal-N</td></tr>
 * <tr><td>lmcache-housekeeping</td><td>one {@code agent.CompositeAgent} ({@code agent.Housekeeping}):
 *     {@code storage.EvictionController} (expiry, lease/prefetch/engine sweeps, watermark eviction) and
 *     {@code metrics.ActivityLog}; the worker reaper joins it</td>
 *     <td>the agents' deadlines</td><td>the object store, leases, prefetch results, modules (under their locks); metrics</td>
 *     <td>closed after the dispatcher and before the modules it sweeps (5 s bounded join)</td></tr>
 * <tr><td>lmcache-cuda-events (CUDA only)</td><td>{@code agent.CudaEventsAgent}: {@code cuda.EventPoller.doWork}
 *     queries events, runs transfer completions, destroys retired events</td>
 *     <td>the retiring events</td><td>what completions touch: publish or unpin objects, hand contexts back;
 *     completions are short and hand anything that can block to the release path</td>
 *     <td>closed after {@code GpuBackend.close}, which drains what is left on the closing thread</td></tr>
 * <tr><td>lmcache-reaper-release-N</td><td>drops of reaped workers (unmap, CUDA IPC close) with a timeout</td>
 *     <td>nothing long-lived</td><td>the liveness targets' instance contexts</td><td>with the reaper</td></tr>
 * <tr><td>lmcache-pool-prepare</td><td>{@code storage.L1Pool}: one pass prefaulting (and pinning) regions</td>
 *     <td>the region in hand</td><td>the store's ready regions, the GPU backend's pinned pool</td>
 *     <td>closing flag after the region in hand (joined at most 30 s); ends by itself when done</td></tr>
 * <tr><td>lmcache-http-N (virtual) and the JDK HTTP dispatcher</td><td>{@code http.HttpApi} routes</td>
 *     <td>nothing long-lived</td><td>status reads, metrics, /cache/clear through the store's lock</td>
 *     <td>{@code HttpApi.close}</td></tr>
 * <tr><td>lmcache-shutdown</td><td>the JVM shutdown hook: {@code LmcacheServer.close}</td>
 *     <td>the close order</td><td>every part's close</td><td>returns when the close is done</td></tr>
 * </table>
 */
package io.lmcache.server;
