package io.lmcache.server.loop;

import io.lmcache.server.peer.PeerId;
import java.nio.ByteBuffer;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;
import zmq.Msg;

/**
 * The reply bytes each peer has not taken yet: handed to the ROUTER and still in its pipe to the peer. ZeroMQ's send
 * high-water mark counts messages, not bytes, so 1 000 queued KV-event pages of 2 MiB each were 2 GB for one peer that
 * never reads (issue 45, N2). A reply is charged when the request loop sends it and given back when JeroMQ's encoder takes
 * it from the pipe to write it to the socket ({@link Tracked#buf}: the encoder's first look at the last frame), or when the
 * peer's connection closes (the pipe and what it held are dropped).
 *
 * <p>A peer over {@link #PEER_SHARE_BYTES} gets its replies dropped (counted), and is disconnected: it has not read a
 * share that no real client leaves unread. All peers together hold at most {@link #TOTAL_BYTES}; past that, only short
 * replies (what every request-response client waits on) are still sent. Any thread; the loop charges, the I/O thread gives back.
 */
final class PeerReplyBytes {
    /** A real client reads as it goes: at most a few pages of KV events or a stream's batch wait for it. */
    static final long PEER_SHARE_BYTES = 16L << 20;
    /** Replies this short are sent whatever the total (a peer's own share still applies). */
    static final int SHORT_REPLY_BYTES = 64 << 10;

    private final long peerShareBytes;
    private final long totalBytes;
    private final AtomicLong total = new AtomicLong();
    private final Map<PeerId, AtomicLong> unsent = new ConcurrentHashMap<>();

    /** All peers' unsent replies: an eighth of the heap. */
    static final long TOTAL_BYTES = Runtime.getRuntime().maxMemory() / 8;

    PeerReplyBytes() {
        this(PEER_SHARE_BYTES, TOTAL_BYTES);
    }

    PeerReplyBytes(long peerShareBytes, long totalBytes) {
        this.peerShareBytes = peerShareBytes;
        this.totalBytes = totalBytes;
    }

    /** Request loop: the peer's counter when {@code bytes} more fit its share and the total; null (nothing charged) when not. */
    AtomicLong charge(PeerId peer, long bytes) {
        AtomicLong own = unsent.computeIfAbsent(peer, key -> new AtomicLong());
        if (own.get() + bytes > peerShareBytes && own.get() > 0) {
            return null; // one reply longer than the share alone still goes: the share bounds what waits, not one reply
        }
        if (bytes > SHORT_REPLY_BYTES && total.get() + bytes > totalBytes) {
            return null;
        }
        own.addAndGet(bytes);
        total.addAndGet(bytes);
        return own;
    }

    /** The reply was not queued after all (the ROUTER refused it), or the encoder took it. */
    void release(AtomicLong own, long bytes) {
        own.addAndGet(-bytes);
        total.addAndGet(-bytes);
    }

    /** The peer's connection closed: what its pipe held is gone. */
    void closed(PeerId peer) {
        AtomicLong own = unsent.remove(peer);
        if (own != null) {
            total.addAndGet(-own.getAndSet(0));
        }
    }

    long unsent(PeerId peer) {
        AtomicLong own = unsent.get(peer);
        return own == null ? 0 : own.get();
    }

    long total() {
        return total.get();
    }

    int peers() {
        return unsent.size();
    }

    /** A reply's last frame: the encoder's first {@link #buf} call means the reply has left the pipe; its bytes go back then. */
    static final class Tracked extends Msg {
        private final PeerReplyBytes owner;
        private final PeerId peer;
        private AtomicLong counter;
        private final long bytes;

        Tracked(byte[] data, PeerReplyBytes owner, PeerId peer, AtomicLong counter, long bytes) {
            super(data);
            this.owner = owner;
            this.peer = peer;
            this.counter = counter;
            this.bytes = bytes;
        }

        /** Runs on: a JeroMQ I/O thread (the encoder), once per message. */
        @Override
        public ByteBuffer buf() {
            AtomicLong own = counter;
            if (own != null) {
                counter = null;
                if (owner.unsent.get(peer) == own) { // else the peer's connection closed: its bytes went back then
                    owner.release(own, bytes);
                }
            }
            return super.buf();
        }
    }
}
