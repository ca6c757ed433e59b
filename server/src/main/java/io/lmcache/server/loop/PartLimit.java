package io.lmcache.server.loop;

import java.util.LinkedHashMap;
import java.util.Map;
import java.util.concurrent.atomic.LongAdder;
import zmq.Msg;
import zmq.io.Metadata;

/**
 * Caps how many frames one message may have, before ZeroMQ queues them. A ZeroMQ pipe hands a
 * message to the reader only once its last frame has arrived, and its high-water mark counts whole
 * messages: a peer that sends frame after frame with the MORE flag and never a last one made the
 * server hold every frame, unbounded, until the heap ran out. At {@link #MAX_PARTS} frames in a row
 * from one connection the frame's MORE flag is cleared: the message ends there (the request loop
 * answers or drops it as malformed) and what follows starts a new one.
 *
 * <p>Runs on the context's one JeroMQ I/O thread only (it sees a frame when the engine sets the
 * connection's metadata on it, before the frame is queued). Connections are told apart by their
 * peer address; ZMTP 1.0/2.0 peers carry no metadata and are not seen here (no LMCache client
 * speaks them). The table is bounded: a run ends, or its entry is the eldest of {@link #MAX_TRACKED}.
 */
final class PartLimit {
    /** The request loop's frame limit less the identity frame the ROUTER adds. */
    static final int MAX_PARTS = RequestLoop.MAX_FRAMES - 1;
    static final int MAX_TRACKED = 4096;

    private final LongAdder cut;
    private final Map<String, int[]> runs = new LinkedHashMap<>(64, 0.75f, true) {
        @Override
        protected boolean removeEldestEntry(Map.Entry<String, int[]> eldest) {
            return size() > MAX_TRACKED;
        }
    };

    PartLimit(LongAdder cut) {
        this.cut = cut;
    }

    /** One frame of the connection with {@code metadata} is about to be queued. */
    void arrived(Msg frame, Metadata metadata) {
        String connection = metadata.get(Metadata.PEER_ADDRESS);
        if (connection == null) {
            return;
        }
        if (!frame.hasMore()) {
            runs.remove(connection);
            return;
        }
        int[] run = runs.computeIfAbsent(connection, key -> new int[1]);
        if (++run[0] >= MAX_PARTS) {
            frame.resetFlags(Msg.MORE);
            runs.remove(connection);
            cut.increment();
        }
    }

    int tracked() {
        return runs.size();
    }
}
