package io.lmcache.server.loop;

import io.lmcache.server.logging.LogText;
import io.lmcache.server.logging.RateLimitedLog;
import io.lmcache.server.metrics.RequestCatalogue;
import io.lmcache.server.metrics.ServerMetrics;
import io.lmcache.server.peer.PeerId;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.concurrent.atomic.LongAdder;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Replies the ROUTER could not take, counted by reason (never by peer: the label set stays
 * bounded however many peers come and go) and logged once per peer that stopped reading. The set
 * of peers already logged is bounded too: past {@link #MAX_LOGGED_PEERS} the oldest is forgotten,
 * and the log line is rate-limited besides. Socket thread only.
 */
final class ReplyDrops {
    private static final Logger LOG = LoggerFactory.getLogger(ReplyDrops.class);
    static final int MAX_LOGGED_PEERS = 1024;

    private final LongAdder notReading;
    private final LongAdder gone;
    private final LongAdder overShare;
    private final LongAdder totalFull;
    private final LongAdder disconnected;
    private final RateLimitedLog log = new RateLimitedLog(LOG, 5);
    private final Map<PeerId, Boolean> logged = new LinkedHashMap<>(64, 0.75f, false) {
        @Override
        protected boolean removeEldestEntry(Map.Entry<PeerId, Boolean> eldest) {
            return size() > MAX_LOGGED_PEERS;
        }
    };

    ReplyDrops(ServerMetrics metrics, ReplyQueue replies) {
        notReading = metrics.declare(RequestCatalogue.REPLIES_DROPPED, "peer_not_reading");
        gone = metrics.declare(RequestCatalogue.REPLIES_DROPPED, "peer_gone");
        overShare = metrics.declare(RequestCatalogue.REPLIES_DROPPED, "peer_over_share");
        totalFull = metrics.declare(RequestCatalogue.REPLIES_DROPPED, "unsent_bytes_full");
        disconnected = metrics.declare(RequestCatalogue.PEERS_DISCONNECTED);
        // runs on: lmcache-http-* (each scrape)
        metrics.functionCounter(RequestCatalogue.REPLIES_DROPPED, replies.dropped(), LongAdder::sum, "server_queue_full");
        // runs on: lmcache-http-* (POST /metrics/reset)
        metrics.onReset(replies.dropped()::reset);
    }

    /** The peer's send queue is at its high-water mark: it has not read its last {@code hwm} replies. */
    void notReading(byte[] identity, int hwm) {
        notReading.increment();
        PeerId peer = new PeerId(identity);
        if (logged.putIfAbsent(peer, Boolean.TRUE) == null) {
            log.warn("peer {} does not read its replies ({} queued): replies to it are dropped until it reads; "
                    + "further drops are only counted (lmcache_mp_replies_dropped_total)", peer, hwm);
        }
    }

    /**
     * The peer left more than its share of reply bytes unread ({@link PeerReplyBytes}): this reply is dropped, and the peer's
     * connections were closed ({@code closed} of them).
     */
    void overShare(byte[] identity, long unsentBytes, int closed) {
        overShare.increment();
        disconnected.add(closed);
        PeerId peer = new PeerId(identity);
        if (logged.putIfAbsent(peer, Boolean.TRUE) == null) {
            log.warn("peer {} left {} MiB of replies unread, over its share of {} MiB: its replies are dropped and its connection "
                    + "closed (lmcache_mp_replies_dropped_total, lmcache_mp_peers_disconnected_total)", LogText.clip(peer),
                    unsentBytes >> 20, PeerReplyBytes.PEER_SHARE_BYTES >> 20);
        }
    }

    /** All peers' unread replies hold their byte bound: a long reply is dropped. */
    void totalFull() {
        totalFull.increment();
    }

    /** No connection of that identity any more (it closed while its request was in flight). */
    void gone() {
        gone.increment();
    }
}
