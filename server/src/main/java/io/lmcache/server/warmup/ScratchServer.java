package io.lmcache.server.warmup;

import io.lmcache.server.assembly.Assembly;
import io.lmcache.server.config.ServerConfig;
import io.lmcache.server.cuda.CopyEngine;
import io.lmcache.server.cuda.ScratchMemory;
import io.lmcache.server.loop.Dispatcher;
import io.lmcache.server.loop.Inbound;
import io.lmcache.server.loop.Outbound;
import io.lmcache.server.loop.ReplyQueue;
import io.lmcache.server.loop.RequestLoop;
import io.lmcache.server.loop.StreamControl;
import io.lmcache.server.metrics.ServerMetrics;
import io.lmcache.server.module.LmcacheDrivenTransferModule;
import io.lmcache.server.peer.PeerConnections;
import io.lmcache.server.peer.PeerId;
import io.lmcache.server.protocol.DType;
import io.lmcache.server.protocol.LayoutHints;
import io.lmcache.server.protocol.Op;
import io.lmcache.server.protocol.Request;
import io.lmcache.server.protocol.TensorWrapper;
import io.lmcache.server.storage.L1Pool;
import io.lmcache.server.storage.L1Tier;
import io.lmcache.server.storage.ObjectStore;
import io.lmcache.server.cuda.DeviceTensors;
import io.lmcache.server.transfer.CopyPaths;
import io.lmcache.server.transfer.CudaCopyPath;
import java.io.IOException;
import java.lang.foreign.Arena;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.nio.file.attribute.PosixFilePermissions;
import java.security.SecureRandom;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HexFormat;
import java.util.List;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.LockSupport;
import org.zeromq.SocketType;
import org.zeromq.ZMQ;

/**
 * A server of the warm-up's own, opened from the production parts themselves ({@link ScratchParts}: the root's
 * {@code ServerParts.SCRATCH}, through the same assembly: L1 tier, release thread, lookup state, peers, the data parts,
 * the KV-event recorder and module, reaper, management and the dispatcher with the server's op table), so the JIT compiles
 * the very methods the first requests run, and sharing nothing with it: its own metrics registry (without the JVM binders,
 * which would stay registered), its own object store over a few MiB of memory off the heap (never the pool), its own KV-event
 * log, its own handler threads, and a worker whose KV tensors are one small segment in /dev/shm that this server creates and
 * deletes. Only its request loop is its own: opened halfway through the rounds, on loopback TCP before ready and in-process
 * after ({@link Listen}, {@link #connect}).
 * The GPU warm-up's ({@link #openGpu}, issue 30) differs only in its memory and its worker's copy path: its pool is scratch
 * pinned host memory and its worker a {@code CudaCopyPath} over scratch device memory, on the device's real copy engine.
 */
final class ScratchServer implements AutoCloseable {
    static final long INSTANCE_ID = 0x7761726d7570L; // "warmup"
    static final String MODEL = "lmcache-warmup/scratch";
    private static final String SEGMENT_PREFIX = "lmcache_warmup_";
    /** The host warm-up's largest round (4 chunks) stored and then retrieved into other blocks. */
    static final int MAX_CHUNKS = 4;
    /**
     * The first DEALER's first round trip; a socket that gets no reply by then is replaced by one that waits four times as
     * long, at most {@link #PROBE_SOCKETS} in all.
     */
    private static final long PROBE_TIMEOUT_NS = TimeUnit.MILLISECONDS.toNanos(250);
    private static final int PROBE_SOCKETS = 3;
    /** How often a wait for a reply through ZeroMQ looks at its deadline and at {@link #abandon}. */
    private static final int RECEIVE_POLL_MS = 20;
    private static final String PEER_NAME = "lmcache-warmup";
    private static final PeerId PEER = new PeerId(PEER_NAME.getBytes(StandardCharsets.US_ASCII));
    private static final String LOOP_THREAD = "lmcache-warmup-loop";
    /**
     * The scratch loops' first-request hook: a loop without one never took that branch, and the server's compiled loop was
     * thrown away at its first real request (the in-process loop of the rounds after ready takes it before ready).
     */
    private static final Runnable NO_HOOK = () -> { };
    /** Calls through the loopback loop per connection: 3 000 rounds of 6 open about 280 connections, ~100 in the 1 s budget. */
    private static final int CALLS_PER_CONNECTION = 64;
    /** The scratch KV-event log's records: the scratch store's events go nowhere, a warm-up only runs the recorder. */
    private static final int SCRATCH_EVENT_LOG = 1024;

    /**
     * The scratch worker's KV layout: {@code layers} NHD bf16 layers {@code [2, blocks, blockSize, heads, headSize]}, every
     * layer on the same memory (the copies land in the same few bytes, which is all a warm-up needs), with room for
     * {@code maxChunks} chunks stored and as many retrieved into other blocks; the scratch pool has {@code regions} regions.
     */
    record Layout(int chunkSize, int blockSize, int layers, int headSize, int maxChunks, int regions) {
        /**
         * The host warm-up's: 16 layers, 512-byte pieces at 16-token blocks: 512 pieces a 256-token chunk, as many as a
         * 32-layer model's with 32-token blocks (the per-piece work of a real layout, what the JIT must see) with little copying.
         */
        static Layout host(int chunkSize) {
            return new Layout(chunkSize, blockSize(chunkSize), 16, 16, MAX_CHUNKS, 4);
        }

        /**
         * The GPU warm-up's: 8 layers of one head of up to 512 values (1 KiB a token at 256-token chunks): a chunk's run of
         * consecutive blocks is 256 KiB, which the engine's batched-copy head takes (-Dlmcache.cuda.*DmaHeadMinPieceKiB), and
         * single blocks (16 KiB) go through the staging kernel; 4 MiB a chunk, 1 or 2 chunks a round, so 2 MiB of device
         * memory and 16 MiB of pinned host memory (2 regions; the store is cleared after every round).
         */
        static Layout gpu(int chunkSize) {
            return new Layout(chunkSize, blockSize(chunkSize), 8, Math.clamp(131_072 / chunkSize, 16, 512), 2, 2);
        }

        private static int blockSize(int chunkSize) {
            return chunkSize % 16 == 0 && chunkSize / 16 <= 64 ? 16 : chunkSize;
        }

        int blocksPerChunk() {
            return chunkSize / blockSize;
        }

        long pieceBytes() {
            return (long) blockSize * headSize * 2;
        }

        long objectBytes() {
            return 2L * layers * blocksPerChunk() * pieceBytes();
        }

        long regionBytes() {
            return Math.max(1 << 20, Long.highestOneBit(objectBytes() * maxChunks - 1) << 1);
        }

        long poolBytes() {
            return regions * regionBytes();
        }

        /** Blocks of the worker's tensors: {@code maxChunks} chunks to store from and as many to retrieve into. */
        int blocks() {
            return 2 * maxChunks * blocksPerChunk();
        }

        long tensorBytes() {
            return 2L * blocks() * pieceBytes();
        }

        long[] shape() {
            return new long[] {2, blocks(), blockSize, 1, headSize};
        }

        long[] stride() {
            return new long[] {(long) blocks() * blockSize * headSize, (long) blockSize * headSize, headSize, headSize, 1};
        }
    }

    final Layout layout;
    final int chunkSize;
    final int blockSize;
    final int blocksPerChunk;
    private final Arena arena;
    private final Path segment;
    /** The production parts of the root's scratch list (its L1 tier over the scratch memory), concluded and not started. */
    private final Assembly parts;
    private final ObjectStore store;
    private final LmcacheDrivenTransferModule transfers;
    private final ReplyQueue replies;
    private final Dispatcher dispatcher;
    private final ServerMetrics metrics;
    /** The host warm-up's own request loop and the scratch worker's DEALER on it; null: requests go straight to the dispatcher. */
    private RequestLoop loop;
    private ZMQ.Socket client;
    private Listen listen;
    /** Frames for a fresh DEALER's first request. */
    private WarmupFrames probeFrames;
    /** DEALERs made so far: each has an identity of its own (the ROUTER ignores a new peer with the identity of one not yet gone). */
    private int sockets;
    private int callsOnConnection;
    private String loopLost;
    /** Connections the scratch worker made over loopback TCP and kept (any thread reads it; only the warm-up's writes). */
    private volatile int loopbackConnections;
    private volatile boolean abandoned;

    /**
     * Opens {@code scratchParts} over {@code pool} (a few MiB off the heap in {@code arena}, the host warm-up's, which this
     * server frees; or the GPU warm-up's pinned scratch memory, freed by its owner) and the scratch configuration;
     * {@code opener}: how the scratch worker's copy path is opened (null: from its tensors, the host warm-up's shared-memory
     * segment).
     */
    private ScratchServer(ScratchParts scratchParts, ServerConfig config, Layout layout, L1Pool pool, CopyPaths.Opener opener, Arena arena,
            Path segment) {
        this.layout = layout;
        this.chunkSize = config.chunkSize();
        this.blockSize = layout.blockSize();
        this.blocksPerChunk = layout.blocksPerChunk();
        this.arena = arena;
        this.segment = segment;
        metrics = ServerMetrics.scratch();
        parts = scratchParts.open(config.forWarmup(SCRATCH_EVENT_LOG), metrics, pool, opener);
        store = parts.get(L1Tier.class).store();
        transfers = parts.get(LmcacheDrivenTransferModule.class);
        replies = parts.get(ReplyQueue.class);
        dispatcher = parts.get(Dispatcher.class);
    }


    /**
     * Opens the scratch server and registers its worker, or returns null when it cannot (no usable /dev/shm here: the warm-up
     * is then skipped, and {@code why[0]} says why).
     */
    static ScratchServer open(ScratchParts parts, ServerConfig config, Object poolFileKey, String[] why) {
        Layout layout = Layout.host(config.chunkSize());
        long tensorBytes = layout.tensorBytes();
        removeStaleSegments();
        Path segment = Path.of("/dev/shm", SEGMENT_PREFIX + ProcessHandle.current().pid() + "_"
                + Long.toHexString(ThreadLocalRandom.current().nextLong()));
        try {
            Files.createFile(segment, PosixFilePermissions.asFileAttribute(PosixFilePermissions.fromString("rw-------")));
            try (FileChannel channel = FileChannel.open(segment, StandardOpenOption.WRITE)) {
                channel.write(ByteBuffer.wrap(new byte[1]), tensorBytes - 1);
            }
        } catch (IOException | UnsupportedOperationException e) {
            why[0] = "cannot create a scratch segment in /dev/shm: " + e;
            deleteQuietly(segment);
            return null;
        }
        Arena arena = Arena.ofShared();
        ScratchServer server;
        try {
            server = new ScratchServer(parts, config, layout, L1Pool.over(arena.allocate(layout.poolBytes(), 4096), layout.regionBytes(),
                    poolFileKey), null, arena, segment);
        } catch (RuntimeException | Error e) {
            arena.close();
            deleteQuietly(segment);
            throw e;
        }
        List<TensorWrapper> wrappers = new ArrayList<>();
        for (int layer = 0; layer < layout.layers(); layer++) {
            wrappers.add(new TensorWrapper.CpuShm("/" + segment.getFileName(), tensorBytes, DType.BFLOAT16, layout.shape(), layout.stride(), 0,
                    ""));
        }
        return server.registered(wrappers, why);
    }

    /** Where the scratch request loop listens. */
    enum Listen {
        /**
         * A free port on {@code 127.0.0.1}, before ready only: the start-up's rounds. JeroMQ's TCP engines (the stream engine,
         * the ZMTP decoder and encoder, the frame budget's allocations, heartbeats, the handshake of each connection) and the
         * loop's metadata branch run only on TCP; an in-process pipe bypasses them, and a fresh server then ran them
         * interpreted for its first real requests (bench/journal/2026-12-06-tcp-engine-warm-up.md). The real ROUTER is
         * bound before the warm-up starts, so a peer reaching this one meanwhile reaches nothing it could not already: a
         * scratch server of synthetic data, with the production limits.
         */
        LOOPBACK_TCP,
        /** An {@code inproc://} endpoint of a random name, which no peer can reach (issue 45 N11): the rounds after ready. */
        IN_PROCESS
    }

    /**
     * Puts a request loop of the scratch server's own on {@code listen}'s endpoint and connects the scratch worker to it as a
     * client does (a DEALER with the worker's identity), so the warm-up's requests also take the ZeroMQ path: the request
     * loop's receive, envelope checks and reply sends, which a fresh server would otherwise interpret for its first requests.
     * A loop already open is halted first. The next requests take that path; false (they go on straight to the dispatcher)
     * when it cannot be opened, and {@code why[0]} says why. Call with no request in flight: from here on the loop takes the
     * replies off the queue.
     */
    boolean connect(ServerConfig config, WarmupFrames frames, Listen listen, String[] why) {
        disconnect();
        this.listen = listen;
        this.probeFrames = frames;
        String where = listen == Listen.LOOPBACK_TCP ? "loopback" : "in-process";
        try {
            String endpoint = listen == Listen.LOOPBACK_TCP ? "tcp://127.0.0.1:*"
                    : "inproc://lmcache-warmup-" + HexFormat.of().formatHex(randomBytes(12));
            loop = new RequestLoop(LOOP_THREAD, endpoint, config.maxMessageBytes(), config.connections(),
                    new RequestLoop.Serving(dispatcher, replies, StreamControl.NONE, NO_HOOK), parts.get(PeerConnections.class), metrics);
            loop.start();
            if (freshClient(frames)) {
                loopLost = null;
                return true;
            }
            why[0] = "no reply through the " + where + " request loop on " + PROBE_SOCKETS + " fresh sockets";
        } catch (RuntimeException e) {
            why[0] = "no " + where + " request loop: " + e;
        }
        disconnect();
        return false;
    }

    /** The loop's client replaced by a fresh DEALER (a new connection, on TCP a new handshake); false when none answered. */
    private boolean freshClient(WarmupFrames frames) {
        if (client != null) {
            client.close();
            client = null;
        }
        for (int attempt = 0; attempt < PROBE_SOCKETS; attempt++) {
            // each attempt waits four times longer: a silent DEALER costs the first wait, a slow host's cold first round trip
            // over TCP (a loaded 2-core CI host) still gets an answer
            if (connected(frames, PROBE_TIMEOUT_NS << (2 * attempt))) {
                return true;
            }
        }
        return false;
    }

    /**
     * On loopback TCP, a new connection every {@link #CALLS_PER_CONNECTION} calls, so the handshake and the listener's accept
     * are in the profiles C2 compiles from: with one connection they were not, and the compiled engine was thrown away at
     * the first real connection (the server's own health probe's, at ready). None answering ends the ZeroMQ path.
     */
    private void nextConnection() {
        if (listen == Listen.LOOPBACK_TCP && ++callsOnConnection >= CALLS_PER_CONNECTION) {
            callsOnConnection = 0;
            if (!freshClient(probeFrames)) {
                loopLost = "no reply through the loopback request loop on " + PROBE_SOCKETS + " fresh sockets; the rest went straight"
                        + " to the dispatcher";
                disconnect();
            }
        }
    }

    /**
     * A DEALER as the worker's (its own identity each attempt: the ROUTER ignores a new peer with the identity of one it has
     * not yet seen go), kept when a QUERY_PREFETCH_STATUS through it is answered: a fresh JeroMQ DEALER is now and then born
     * sending nothing (one in a few hundred here, see the tests' TestClient), and its rounds would all wait out the budget.
     */
    private boolean connected(WarmupFrames frames, long timeoutNs) {
        client = loop.clientSocket(SocketType.DEALER);
        int n = sockets++;
        client.setIdentity(n == 0 ? PEER.bytes() : (PEER_NAME + "-" + n).getBytes(StandardCharsets.US_ASCII));
        client.setLinger(0);
        client.setReceiveTimeOut(RECEIVE_POLL_MS);
        client.connect(loop.endpoint());
        try {
            callThroughZeroMq(frames.queryPrefetchStatus("warmup-probe"), System.nanoTime() + timeoutNs);
            if (listen == Listen.LOOPBACK_TCP) {
                loopbackConnections++;
            }
            return true;
        } catch (NoReply e) {
            client.close();
            client = null;
            return false;
        }
    }

    /** The production parts this server opened, in opening order. */
    List<String> partsOpened() {
        return parts.opened();
    }

    /** Where the scratch request loop listens, or null before {@link #connect} (or once a fresh DEALER got no answer). */
    String loopEndpoint() {
        return loop == null ? null : loop.endpoint();
    }

    /** Why the scratch request loop was given up after it had served (a fresh DEALER got no answer), or null. */
    String loopLost() {
        return loopLost;
    }

    /** Connections made over loopback TCP, each answered ({@link Listen#LOOPBACK_TCP}). */
    int loopbackConnections() {
        return loopbackConnections;
    }

    /** Whether requests take the scratch request loop (else they go straight to the dispatcher). */
    boolean throughLoop() {
        return client != null;
    }

    /** Ends every wait for a reply now (any thread): the warm-up is told to stop, and a round under way must not hold it. */
    void abandon() {
        abandoned = true;
    }

    private void disconnect() {
        if (client != null) {
            client.close();
            client = null;
        }
        if (loop != null) {
            try {
                loop.halt(); // its client, closed above, waits for nothing: no drain (RequestLoop.halt says why)
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
            loop = null;
        }
    }

    /**
     * The GPU warm-up's scratch server (issue 30): its store's pool is {@code memory}'s pinned host memory, and its worker's
     * tensors are {@code memory}'s device memory, copied through the device's real {@code engine} (a {@link CudaCopyPath} on
     * scratch memory: nothing is IPC-opened, the worker's handles are zeros that nothing reads). Null when the registration
     * is refused ({@code why[0]} says why).
     */
    static ScratchServer openGpu(ScratchParts parts, ServerConfig config, Layout layout, ScratchMemory memory, CopyEngine engine,
            DeviceTensors storeFrom, String[] why) {
        // STOREs read a real worker's KV when given (aliases of its storages), else the scratch device memory; RETRIEVEs write scratch
        CopyPaths.Opener opener = wrappers -> storeFrom == null ? CudaCopyPath.scratch(memory.tensors(wrappers.size()), engine, memory)
                : CudaCopyPath.readingWorker(storeFrom, memory.tensors(wrappers.size()), engine, memory);
        ScratchServer server = new ScratchServer(parts, config, layout, L1Pool.over(memory.hostSegment(), layout.regionBytes(), null), opener,
                null, null);
        return server.registered(gpuWrappers(layout, memory.device().uuid()), why);
    }

    /** The GPU scratch worker's tensors as its REGISTER names them: zero handles (never opened), one per layer. */
    static List<TensorWrapper> gpuWrappers(Layout layout, String deviceUuid) {
        List<TensorWrapper> wrappers = new ArrayList<>();
        for (int layer = 0; layer < layout.layers(); layer++) {
            wrappers.add(new TensorWrapper.RawCudaIpc(new byte[64], 0, layout.tensorBytes(), DType.BFLOAT16, layout.shape(), layout.stride(), 0,
                    deviceUuid));
        }
        return wrappers;
    }

    /** Registers the scratch worker; this server, or null (closed) when the registration is refused. */
    private ScratchServer registered(List<TensorWrapper> wrappers, String[] why) {
        transfers.register(new Request.RegisterKvCache(INSTANCE_ID, wrappers, MODEL, 1, "vllm", new LayoutHints("NHD", 0, 0, 0), List.of()),
                PEER);
        if (transfers.objectShapes(MODEL).isEmpty()) {
            why[0] = "the scratch worker's registration was refused";
            close();
            return null;
        }
        return this;
    }

    /**
     * Deletes the scratch segments of servers that died during their warm-up (killed before they could delete theirs): a file
     * named {@code lmcache_warmup_<pid>_<random>} whose process is gone. Only this prefix, which no client uses, is touched.
     */
    private static void removeStaleSegments() {
        try (DirectoryStream<Path> files = Files.newDirectoryStream(Path.of("/dev/shm"), SEGMENT_PREFIX + "*")) {
            for (Path file : files) {
                String[] parts = file.getFileName().toString().substring(SEGMENT_PREFIX.length()).split("_", 2);
                try {
                    if (parts.length == 2 && ProcessHandle.of(Long.parseLong(parts[0])).isEmpty()) {
                        deleteQuietly(file);
                    }
                } catch (NumberFormatException e) {
                    // not one of ours
                }
            }
        } catch (IOException | RuntimeException e) {
            // nothing to clean up, or no /dev/shm: the warm-up reports the latter when it creates its own
        }
    }

    /**
     * Sends one request as the scratch worker (through the scratch request loop when there is one, else to the dispatcher as
     * the socket thread does) and waits for its reply's payload (null: no payload) until {@code deadlineNs}, the warm-up's
     * own end: a fixed wait would either outlast its budget or, on a loaded host where a cold JVM's first STORE took over
     * 2 s (CI, 2 cores), end a warm-up that still had time.
     *
     * @throws NoReply when the reply has not come by then
     */
    byte[] call(Inbound request, long deadlineNs) {
        if (client != null) {
            byte[] payload = callThroughZeroMq(request, deadlineNs);
            nextConnection();
            return payload;
        }
        dispatcher.dispatch(request);
        while (true) {
            Outbound reply = replies.poll();
            if (reply != null && Arrays.equals(reply.uid(), request.frames()[1])) {
                return reply.payload();
            }
            if (reply != null) {
                continue; // the late reply of a request whose wait had ended
            }
            if (abandoned || System.nanoTime() - deadlineNs > 0) {
                throw new NoReply(request.op());
            }
            LockSupport.parkNanos(1_000);
        }
    }

    /** {@code [uid, op, payloads...]} from the DEALER, {@code [uid, op(, payload)]} back; a reply to another uid is skipped. */
    private byte[] callThroughZeroMq(Inbound request, long deadlineNs) {
        byte[][] frames = request.frames();
        for (int i = 1; i < request.frameCount(); i++) {
            client.send(frames[i], i + 1 < request.frameCount() ? ZMQ.SNDMORE : 0);
        }
        while (true) {
            if (abandoned || System.nanoTime() - deadlineNs > 0) {
                throw new NoReply(request.op());
            }
            byte[] uid = client.recv(0);
            if (uid == null) {
                continue; // RECEIVE_POLL_MS passed: the deadline and abandon(), checked above
            }
            byte[] payload = null;
            int parts = 1;
            while (client.hasReceiveMore()) {
                byte[] frame = client.recv(0);
                if (++parts == 3) {
                    payload = frame;
                }
            }
            if (Arrays.equals(uid, frames[1])) {
                return payload;
            }
        }
    }

    /** A scratch request's reply did not come by the warm-up's deadline (or it was told to stop): the warm-up ends there. */
    static final class NoReply extends RuntimeException {
        private static final long serialVersionUID = 1L;

        NoReply(Op op) {
            super("no reply to the warm-up's " + op.wireName() + " within its budget, or the warm-up was stopped", null, false, false);
        }
    }

    /** Forgets every stored object (the next rounds store new ones: the scratch pool holds only a few rounds). */
    void clear() {
        store.clear(true);
    }

    int storedObjects() {
        return store.snapshot().objects();
    }

    /**
     * Waits until no scratch object is write-locked or pinned, i.e. every STORE's and RETRIEVE's completion has run (on the GPU
     * path they run on lmcache-cuda-events once the copy's event fired); false when that did not happen by {@code deadlineNs}.
     */
    boolean awaitSettled(long deadlineNs) {
        while (true) {
            ObjectStore.Snapshot now = store.snapshot();
            if (now.writeLocked() == 0 && now.pinned() == 0) {
                return true;
            }
            if (System.nanoTime() - deadlineNs > 0) {
                return false;
            }
            LockSupport.parkNanos(10_000);
        }
    }

    @Override
    public void close() {
        disconnect();
        // the parts close last opened first: the dispatcher, the transfer module (its worker's mappings released), the store's tier
        parts.close();
        store.clear(true);
        if (segment != null) {
            deleteQuietly(segment);
        }
        if (arena != null) {
            arena.close();
        }
    }

    private static byte[] randomBytes(int count) {
        byte[] bytes = new byte[count];
        new SecureRandom().nextBytes(bytes);
        return bytes;
    }

    private static void deleteQuietly(Path path) {
        try {
            Files.deleteIfExists(path);
        } catch (IOException e) {
            // a scratch file left in /dev/shm: named for this process, a few MiB
        }
    }
}
