package io.lmcache.server.l2.redis;

import io.lettuce.core.ClientOptions;
import io.lettuce.core.RedisClient;
import io.lettuce.core.RedisURI;
import io.lettuce.core.ScanArgs;
import io.lettuce.core.ScanCursor;
import io.lettuce.core.SocketOptions;
import io.lettuce.core.TimeoutOptions;
import io.lettuce.core.api.StatefulConnection;
import io.lettuce.core.api.StatefulRedisConnection;
import io.lettuce.core.api.async.RedisAsyncCommands;
import io.lettuce.core.cluster.ClusterClientOptions;
import io.lettuce.core.cluster.ClusterTopologyRefreshOptions;
import io.lettuce.core.cluster.RedisClusterClient;
import io.lettuce.core.cluster.SlotHash;
import io.lettuce.core.cluster.api.StatefulRedisClusterConnection;
import io.lettuce.core.cluster.models.partitions.RedisClusterNode;
import io.lettuce.core.protocol.ProtocolVersion;
import io.lettuce.core.resource.ClientResources;
import io.lettuce.core.resource.DefaultClientResources;
import io.lettuce.core.resource.Delay;
import io.lettuce.core.resource.NettyCustomizer;
import io.lmcache.server.l2.L2SpecException;
import io.netty.bootstrap.Bootstrap;
import io.netty.buffer.ByteBufAllocator;
import io.netty.channel.ChannelOption;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.ThreadFactory;
import java.util.concurrent.TimeUnit;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import reactor.core.Disposable;

/**
 * The adapter's connections to one Redis/Valkey node or cluster, through Lettuce: one for values
 * (SET, GET) and one for the small commands (EXISTS, DEL, INFO), so a LOOKUP never queues behind
 * a write-through backlog of 32 MiB values. Connecting runs in the background and is retried
 * until it works (a cluster that is not up yet at start is not a start failure); afterwards Lettuce
 * reconnects each node by itself. Requests to a node that is down fail at once (rejected while
 * disconnected) or after {@code request_timeout}; the cluster topology is refreshed on MOVED/ASK,
 * reconnects and every {@link #TOPOLOGY_REFRESH}.
 */
final class RedisLink implements AutoCloseable {
    private static final Logger LOG = LoggerFactory.getLogger(RedisLink.class);
    private static final Duration TOPOLOGY_REFRESH = Duration.ofSeconds(10);
    /** Reconnect attempts back off from 10 ms to this: a node that comes back is used again within about a second. */
    private static final Duration RECONNECT_MAX = Duration.ofSeconds(1);
    private static final long RETRY_MIN_NS = TimeUnit.MILLISECONDS.toNanos(100);
    private static final long RETRY_MAX_NS = TimeUnit.SECONDS.toNanos(5);
    private static final long CLOSE_TIMEOUT_MS = 2_000;

    /** Both connections, set together once both are open. */
    record Connections(StatefulConnection<String, LentBuffer> values, StatefulConnection<String, LentBuffer> control) {}

    /** A node as the topology (or the spec, standalone) names it. */
    record Node(String address, String nodeId, String role, int slots, boolean failFlagged) {}

    private final RedisSpec spec;
    private final String name;
    private final ScheduledExecutorService scheduler;
    private final FailureLog failures;
    private final ClientResources resources;
    private final RedisClient client;
    private final RedisClusterClient clusterClient;
    private final Disposable events;
    private final ValueBuffers buffers;
    private final ScheduledFuture<?> trim;
    private volatile Connections connections;
    private volatile boolean closed;
    /** Touched by one connect attempt at a time (each schedules the next). */
    private volatile long retryNs = RETRY_MIN_NS;

    RedisLink(RedisSpec spec, String name, ThreadFactory threads, ScheduledExecutorService scheduler, FailureLog failures,
            ReconnectLog reconnects) {
        this.spec = spec;
        this.name = name;
        this.scheduler = scheduler;
        this.failures = failures;
        int ioThreads = Math.clamp(Runtime.getRuntime().availableProcessors(), 2, 4);
        this.buffers = new ValueBuffers(ByteBufAllocator.DEFAULT, spec.numWorkers());
        // runs on: the adapter's scheduler thread
        this.trim = scheduler.scheduleWithFixedDelay(() -> buffers.trimIdle(System.nanoTime()), ValueBuffers.IDLE_NS,
                ValueBuffers.IDLE_NS / 2, TimeUnit.NANOSECONDS);
        this.resources = DefaultClientResources.builder().ioThreadPoolSize(ioThreads).computationThreadPoolSize(2)
                .threadFactoryProvider(pool -> threads).nettyCustomizer(allocator(buffers))
                .reconnectDelay(Delay.exponential(Duration.ofMillis(10), RECONNECT_MAX, 2, TimeUnit.MILLISECONDS)).build();
        // runs on: Lettuce's event bus (its computation threads)
        this.events = resources.eventBus().get().subscribe(reconnects::onEvent);
        Duration requestTimeout = Duration.ofNanos(spec.requestTimeoutNs());
        SocketOptions socket = SocketOptions.builder().connectTimeout(Duration.ofNanos(spec.connectionTimeoutNs())).keepAlive(true)
                .tcpNoDelay(true).build();
        List<RedisURI> uris = new ArrayList<>();
        for (RedisSpec.Endpoint node : spec.nodes()) {
            uris.add(uri(spec, node, requestTimeout));
        }
        if (spec.clusterMode()) {
            this.client = null;
            this.clusterClient = RedisClusterClient.create(resources, uris);
            clusterClient.setOptions(ClusterClientOptions.builder().protocolVersion(ProtocolVersion.RESP2).autoReconnect(true)
                    .disconnectedBehavior(ClientOptions.DisconnectedBehavior.REJECT_COMMANDS).socketOptions(socket)
                    .timeoutOptions(TimeoutOptions.enabled(requestTimeout)).maxRedirects(5)
                    .topologyRefreshOptions(ClusterTopologyRefreshOptions.builder().enablePeriodicRefresh(TOPOLOGY_REFRESH)
                            .adaptiveRefreshTriggersTimeout(Duration.ofSeconds(1)).build()) // adaptive triggers are on by default in Lettuce 7
                    .build());
        } else {
            this.clusterClient = null;
            this.client = RedisClient.create(resources);
            client.setOptions(ClientOptions.builder().protocolVersion(ProtocolVersion.RESP2).autoReconnect(true)
                    .disconnectedBehavior(ClientOptions.DisconnectedBehavior.REJECT_COMMANDS).socketOptions(socket)
                    .timeoutOptions(TimeoutOptions.enabled(requestTimeout)).build());
        }
    }

    /** Lettuce sets Netty's default allocator on each connection's bootstrap, then calls this: the value buffers win. */
    private static NettyCustomizer allocator(ValueBuffers buffers) {
        return new NettyCustomizer() {
            @Override
            public void afterBootstrapInitialized(Bootstrap bootstrap) {
                bootstrap.option(ChannelOption.ALLOCATOR, buffers);
            }
        };
    }

    /** The kept value buffers, for {@code /status}. */
    Map<String, Object> bufferStatus() {
        return buffers.status();
    }

    private static RedisURI uri(RedisSpec spec, RedisSpec.Endpoint node, Duration requestTimeout) {
        RedisURI.Builder builder = RedisURI.builder().withHost(node.host()).withPort(node.port()).withSsl(spec.tlsEnable())
                .withTimeout(requestTimeout);
        if (!spec.clusterMode()) {
            builder.withDatabase(spec.databaseId());
        }
        // AUTH only when a password is set (as LMCache's resp client): with a username, the ACL form
        if (!spec.password().isEmpty()) {
            if (spec.username().isEmpty()) {
                builder.withPassword(spec.password().toCharArray());
            } else {
                builder.withAuthentication(spec.username(), spec.password());
            }
        }
        return builder.build();
    }

    /** Starts connecting in the background (runs on: the adapter's scheduler thread). */
    void start() {
        scheduler.execute(this::connect);
    }

    private void connect() {
        if (closed) {
            return;
        }
        CompletableFuture<StatefulConnection<String, LentBuffer>> values = open();
        CompletableFuture<StatefulConnection<String, LentBuffer>> control = open();
        // runs on: a Lettuce I/O thread, when both attempts ended
        CompletableFuture.allOf(values, control).thenCompose(opened -> warmUp(values.join(), control.join())).whenComplete((ignored, error) -> {
            if (error == null && !closed) {
                connections = new Connections(values.join(), control.join());
                retryNs = RETRY_MIN_NS;
                LOG.info("{}: connected to {} ({})", name, L2SpecException.clip(spec.nodes(), L2SpecException.MAX_MESSAGE_CHARS),
                        spec.clusterMode() ? "cluster" : "standalone");
                return;
            }
            values.thenAccept(StatefulConnection::closeAsync);
            control.thenAccept(StatefulConnection::closeAsync);
            if (closed) {
                return;
            }
            failures.failed("connect", 1, "cannot connect to " + spec.nodes() + ", retrying in " + TimeUnit.NANOSECONDS.toMillis(retryNs)
                    + " ms", error);
            scheduler.schedule(this::connect, retryNs, TimeUnit.NANOSECONDS);
            retryNs = Math.min(RETRY_MAX_NS, retryNs * 2);
        });
    }

    /**
     * Cluster: opens both connections' links to every master now. Lettuce opens a node's link on its first command and, rejecting
     * commands while disconnected, would fail the commands that find it still opening. A master that is down now is tried again
     * on a later command (which fails at once until then).
     */
    private CompletableFuture<Void> warmUp(StatefulConnection<String, LentBuffer> values, StatefulConnection<String, LentBuffer> control) {
        if (!(values instanceof StatefulRedisClusterConnection<String, LentBuffer> valuesCluster
                && control instanceof StatefulRedisClusterConnection<String, LentBuffer> controlCluster)) {
            return CompletableFuture.completedFuture(null);
        }
        List<CompletableFuture<?>> links = new ArrayList<>();
        for (RedisClusterNode node : controlCluster.getPartitions()) {
            if (node.getRole() != null && node.getRole().isUpstream()) {
                for (StatefulRedisClusterConnection<String, LentBuffer> cluster : List.of(valuesCluster, controlCluster)) {
                    links.add(cluster.getConnectionAsync(node.getUri().getHost(), node.getUri().getPort()).handle((link, error) -> {
                        if (error != null) {
                            failures.failed("connect", 1, "cannot reach " + node.getUri().getHost() + ":" + node.getUri().getPort(), error);
                        }
                        return null;
                    }));
                }
            }
        }
        return CompletableFuture.allOf(links.toArray(CompletableFuture[]::new));
    }

    private CompletableFuture<StatefulConnection<String, LentBuffer>> open() {
        try {
            if (clusterClient != null) {
                // the topology first: Lettuce's asynchronous connect does not load it by itself
                return clusterClient.refreshPartitionsAsync().toCompletableFuture()
                        .thenCompose(loaded -> clusterClient.connectAsync(ValueCodec.INSTANCE)).thenApply(c -> c);
            }
            RedisURI uri = uri(spec, spec.nodes().getFirst(), Duration.ofNanos(spec.requestTimeoutNs()));
            return client.connectAsync(ValueCodec.INSTANCE, uri).toCompletableFuture().thenApply(c -> c);
        } catch (RuntimeException e) {
            return CompletableFuture.failedFuture(e);
        }
    }

    /** Both connections, or null until the first connect worked (or after close). */
    Connections connections() {
        return closed ? null : connections;
    }

    boolean clusterMode() {
        return clusterClient != null;
    }

    /** The nodes as the client knows them: the cluster's topology (masters and replicas), or the one standalone node. */
    List<Node> nodes() {
        Connections now = connections();
        if (!(now != null && now.control() instanceof StatefulRedisClusterConnection<String, LentBuffer> cluster)) {
            RedisSpec.Endpoint node = spec.nodes().getFirst();
            return List.of(new Node(node.toString(), "", "master", 16384, false));
        }
        List<Node> nodes = new ArrayList<>();
        for (RedisClusterNode node : cluster.getPartitions()) {
            String role = node.getRole() != null && node.getRole().isUpstream() ? "master" : "replica";
            nodes.add(new Node(node.getUri().getHost() + ":" + node.getUri().getPort(), node.getNodeId(), role, node.getSlots().size(),
                    node.is(RedisClusterNode.NodeFlag.FAIL) || node.is(RedisClusterNode.NodeFlag.EVENTUAL_FAIL)));
        }
        return nodes;
    }

    /**
     * {@code INFO memory} of one node on the control connection, after a PING on the values connection (each bounded by the request
     * timeout like every command): the node is reachable when both links to it work. In a cluster this goes through the pooled
     * links slot routing uses (by host and port), and opens them when missing: a master that was down when a link was first wanted
     * gets its links again here, before traffic needs them (Lettuce would refuse the first commands to a link still opening).
     */
    CompletableFuture<String> infoMemory(Node node) {
        Connections now = connections();
        if (now == null) {
            return CompletableFuture.failedFuture(new IllegalStateException("not connected"));
        }
        if (now.control() instanceof StatefulRedisClusterConnection<String, LentBuffer> control
                && now.values() instanceof StatefulRedisClusterConnection<String, LentBuffer> values) {
            int colon = node.address().lastIndexOf(':');
            String host = node.address().substring(0, colon);
            int port = Integer.parseInt(node.address().substring(colon + 1));
            return values.getConnectionAsync(host, port).thenCompose(c -> c.async().ping())
                    .thenCompose(pong -> control.getConnectionAsync(host, port)).thenCompose(c -> c.async().info("memory"));
        }
        if (now.control() instanceof StatefulRedisConnection<String, LentBuffer> single) {
            return single.async().info("memory").toCompletableFuture();
        }
        return CompletableFuture.failedFuture(new IllegalStateException("unknown connection type"));
    }

    /**
     * The node ({@code host:port}, as {@link #nodes} names them) that holds {@code wireKey}: its slot's master in a cluster (empty
     * when the topology has no master for it yet), the one node standalone.
     */
    String nodeOf(String wireKey) {
        Connections now = connections();
        if (now != null && now.control() instanceof StatefulRedisClusterConnection<String, LentBuffer> cluster) {
            RedisClusterNode node = cluster.getPartitions().getPartitionBySlot(SlotHash.getSlot(wireKey));
            return node == null ? "" : node.getUri().getHost() + ":" + node.getUri().getPort();
        }
        return spec.nodes().getFirst().toString();
    }

    /** The masters ({@code host:port}) a listing walks, in address order: the cluster's, or the one standalone node. */
    List<String> masters() {
        Connections now = connections();
        if (now != null && now.control() instanceof StatefulRedisClusterConnection<String, LentBuffer> cluster) {
            List<String> masters = new ArrayList<>();
            for (RedisClusterNode node : cluster.getPartitions()) {
                if (node.getRole() != null && node.getRole().isUpstream()) {
                    masters.add(node.getUri().getHost() + ":" + node.getUri().getPort());
                }
            }
            masters.sort(null);
            return masters;
        }
        return List.of(spec.nodes().getFirst().toString());
    }

    /**
     * One SCAN step on {@code node}'s control connection ({@code MATCH pattern COUNT count}) and the STRLEN of each key it returned,
     * pipelined; the caller bounds the wait.
     */
    CompletableFuture<Scanned> scan(String node, String cursor, String pattern, int count) {
        Connections now = connections();
        if (now == null) {
            return CompletableFuture.failedFuture(new IllegalStateException("not connected"));
        }
        CompletableFuture<RedisAsyncCommands<String, LentBuffer>> commands;
        if (now.control() instanceof StatefulRedisClusterConnection<String, LentBuffer> control) {
            int colon = node.lastIndexOf(':');
            commands = control.getConnectionAsync(node.substring(0, colon), Integer.parseInt(node.substring(colon + 1)))
                    .thenApply(StatefulRedisConnection::async);
        } else if (now.control() instanceof StatefulRedisConnection<String, LentBuffer> single) {
            commands = CompletableFuture.completedFuture(single.async());
        } else {
            return CompletableFuture.failedFuture(new IllegalStateException("unknown connection type"));
        }
        return commands.thenCompose(c -> c.scan(ScanCursor.of(cursor), ScanArgs.Builder.matches(pattern).limit(count)).toCompletableFuture()
                .thenCompose(page -> {
                    List<CompletableFuture<Long>> sizes = page.getKeys().stream().map(k -> c.strlen(k).toCompletableFuture()).toList();
                    return CompletableFuture.allOf(sizes.toArray(CompletableFuture[]::new)).thenApply(done -> new Scanned(page.getKeys(),
                            sizes.stream().map(CompletableFuture::join).toList(), page.isFinished() ? null : page.getCursor()));
                }));
    }

    /** A SCAN step's keys, their value sizes, and the node's next cursor (null when the node is done). */
    record Scanned(List<String> keys, List<Long> sizes, String nextCursor) {}

    /** A PING to {@code node} on the control connection (the circuit breaker's probe); the caller bounds the wait. */
    CompletableFuture<String> ping(String node) {
        Connections now = connections();
        if (now == null) {
            return CompletableFuture.failedFuture(new IllegalStateException("not connected"));
        }
        if (now.control() instanceof StatefulRedisClusterConnection<String, LentBuffer> control) {
            int colon = node.lastIndexOf(':');
            return control.getConnectionAsync(node.substring(0, colon), Integer.parseInt(node.substring(colon + 1)))
                    .thenCompose(c -> c.async().ping());
        }
        if (now.control() instanceof StatefulRedisConnection<String, LentBuffer> single) {
            return single.async().ping().toCompletableFuture();
        }
        return CompletableFuture.failedFuture(new IllegalStateException("unknown connection type"));
    }

    @Override
    public void close() {
        closed = true;
        events.dispose();
        Connections now = connections;
        if (now != null) {
            List<CompletableFuture<Void>> closing = List.of(now.values().closeAsync(), now.control().closeAsync());
            try {
                CompletableFuture.allOf(closing.toArray(CompletableFuture[]::new)).get(CLOSE_TIMEOUT_MS, TimeUnit.MILLISECONDS);
            } catch (Exception e) {
                LOG.warn("{}: connections not closed within {} ms: {}", name, CLOSE_TIMEOUT_MS, FailureLog.describe(e));
            }
        }
        if (clusterClient != null) {
            clusterClient.shutdown(Duration.ZERO, Duration.ofMillis(CLOSE_TIMEOUT_MS));
        } else {
            client.shutdown(Duration.ZERO, Duration.ofMillis(CLOSE_TIMEOUT_MS));
        }
        resources.shutdown(0, CLOSE_TIMEOUT_MS, TimeUnit.MILLISECONDS);
        trim.cancel(false);
        buffers.close();
    }
}
