package io.lmcache.server.module;

import io.lmcache.server.config.CommitSettings;
import io.lmcache.server.protocol.CacheKey;
import io.lmcache.server.protocol.Request;
import io.lmcache.server.protocol.RequestTags;
import io.lmcache.server.storage.ChunkHash;
import io.lmcache.server.storage.ChunkKey;
import io.lmcache.server.storage.Committed;
import io.lmcache.server.storage.ObjectStore;
import io.lmcache.server.storage.StoredObject;
import io.lmcache.server.tables.BoundedTable;
import io.lmcache.server.tables.WireKey;
import io.lmcache.server.transfer.ChunkHashes;
import io.lmcache.server.transfer.LookupGeometry;
import io.lmcache.server.transfer.ObjectGroupCatalog;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.LongAdder;

/**
 * LMCache's window commit at a turn boundary ({@code --commit-policy}; design "Sliding-window commits", stored text id
 * 69066784989, and {@code commit_policy.py} as {@code tests/v1/multiprocess/test_commit_policy.py}, stored id 68892730332, pins it
 * down): when END_SESSION says a request ended where the next turn resumes, the last window of every sliding-window object group
 * ({@code num_chunks_in_sw[g] >= 1}) ending at the anchor is copied from L1 to L2 at once, the L1 copy kept. Full-attention groups
 * are skipped (the write-through wrote them), so a model without a sliding-window group commits nothing.
 *
 * <p>Per request it remembers what LMCache's {@code Session} does: the end of the looked-up prompt ({@code lookup_end}), the
 * furthest chunk a STORE planned ({@code resolved_end}) and that STORE's hash chain (so END_SESSION hashes nothing). The table is
 * bounded in sessions and bytes (the request id, kept only as its digest when long, the model, salt, tags and chain counted);
 * END_SESSION drops the entry. More than that means sessions are not being ended: the least recently active are forgotten (never
 * committed; counted in {@code forgotten_sessions} and {@code lmcache_mp_table_evictions_total{table="window_sessions"}}).
 * Only built with {@code --commit-policy stop_token} and an L2 tier.
 */
public final class WindowCommit {
    static final int MAX_SESSIONS = 1 << 16;
    static final long MAX_BYTES = 32L << 20;

    /** Where the copies go: {@code StoreController.flush}, which takes the pins. */
    @FunctionalInterface
    public interface Flusher {
        int flush(List<Committed> pinned);
    }

    /** What LMCache's {@code Session} keeps for a commit. */
    private static final class Session {
        String model;
        String salt;
        RequestTags tags;
        int worldSize;
        int promptEndTokens;
        int storedEndTokens;
        byte[] chain;
        int chainChunks;

        /** Its heap: the strings it keeps (the key's own, shared with nothing once the request is gone), tags and chain. */
        long bytes() {
            long tagBytes = 0;
            for (RequestTags.Tag tag : tags.tags()) {
                tagBytes += WireKey.bytes(tag.name()) + WireKey.bytes(tag.value()) + 32;
            }
            return 64 + WireKey.bytes(model) + WireKey.bytes(salt) + tagBytes + (chain == null ? 0 : 16 + chain.length);
        }
    }

    private final CommitSettings settings;
    private final int chunkSize;
    private final ObjectStore store;
    private final ObjectGroupCatalog catalog;
    private final Flusher flusher;
    private final BoundedTable<Session> sessions;
    private final LongAdder commits = new LongAdder();
    private final LongAdder declined = new LongAdder();
    private final LongAdder forgotten = new LongAdder();
    private final LongAdder missing = new LongAdder();

    public WindowCommit(CommitSettings settings, int chunkSize, ObjectStore store, ObjectGroupCatalog catalog, Flusher flusher) {
        this(settings, chunkSize, store, catalog, flusher, MAX_SESSIONS, MAX_BYTES);
    }

    WindowCommit(CommitSettings settings, int chunkSize, ObjectStore store, ObjectGroupCatalog catalog, Flusher flusher, int maxSessions,
            long maxBytes) {
        this.sessions = new BoundedTable<>("window_sessions", maxSessions, maxBytes);
        this.settings = settings;
        this.chunkSize = chunkSize;
        this.store = store;
        this.catalog = catalog;
        this.flusher = flusher;
    }

    /**
     * LMCache's {@code StopTokenCommitPolicy.should_commit}: nothing stored, nothing to commit; at {@code generation_end} a turn
     * that stopped ({@code finish_reason == "stop"}) on a boundary token (any, when none is configured); at {@code prompt_end}
     * every ending but {@code abort}, {@code error} and an empty report (the conversation may not continue). No end info (an older
     * client) is the empty report.
     */
    static boolean shouldCommit(CommitSettings settings, Request.SessionEndInfo info, int storedEndTokens) {
        if (settings.policy() != CommitSettings.Policy.STOP_TOKEN || storedEndTokens <= 0 || info == null) {
            return false;
        }
        String reason = info.finishReason() == null ? "" : info.finishReason();
        if (settings.anchor() == CommitSettings.Anchor.PROMPT_END) {
            return !reason.isEmpty() && !reason.equals("abort") && !reason.equals("error");
        }
        if (!reason.equals("stop")) {
            return false;
        }
        return settings.boundaryTokens().isEmpty()
                || info.stopTokenId() >= 0 && info.stopTokenId() <= Integer.MAX_VALUE && settings.boundaryTokens().contains((int) info.stopTokenId());
    }

    /** LMCache's {@code resolve_anchor}: the anchor's token offset, clipped to what was stored, in whole chunks. */
    static int anchorChunks(CommitSettings.Anchor anchor, int promptEndTokens, int storedEndTokens, int chunkSize) {
        int offset = anchor == CommitSettings.Anchor.GENERATION_END ? storedEndTokens : Math.min(promptEndTokens, storedEndTokens);
        return Math.max(0, offset) / chunkSize;
    }

    /** A LOOKUP (any thread): the prompt's end. */
    public void looked(CacheKey key) {
        synchronized (sessions) {
            Session s = session(key);
            s.promptEndTokens = Math.max(0, key.end());
            keep(key.requestId(), s);
        }
    }

    /** A STORE's plan (a transfer thread): how far the request stored, and the hash chain up to there. */
    public void stored(CacheKey key, ChunkHashes chain) {
        synchronized (sessions) {
            Session s = session(key);
            if (key.end() > s.storedEndTokens) {
                s.storedEndTokens = key.end();
            }
            if (chain.endChunk() > s.chainChunks) {
                s.chain = chain.bytes();
                s.chainChunks = chain.endChunk();
            }
            keep(key.requestId(), s);
        }
    }

    /** (Re)puts the session with its current cost, as the most recently active; what the caps push out is forgotten. */
    private void keep(String requestId, Session s) {
        List<Session> evicted = new ArrayList<>();
        sessions.put(requestId, s, s.bytes(), evicted);
        forgotten.add(evicted.size());
    }

    private Session session(CacheKey key) {
        Session s = sessions.get(key.requestId());
        if (s == null) {
            s = new Session();
        }
        s.model = key.modelName();
        s.salt = key.cacheSalt();
        s.tags = key.tags();
        s.worldSize = key.worldSize();
        return s;
    }

    /**
     * END_SESSION, before the session's bookkeeping ends (LMCache's {@code handle_end_session}: commit first, because
     * {@code end_session} removes what the commit reads). Returns the objects handed to L2.
     */
    public int end(String requestId, Request.SessionEndInfo info) {
        Session s;
        synchronized (sessions) {
            s = sessions.remove(requestId);
        }
        if (s == null || s.chain == null) {
            return 0;
        }
        if (!shouldCommit(settings, info, s.storedEndTokens)) {
            declined.increment();
            return 0;
        }
        int anchor = Math.min(anchorChunks(settings.anchor(), s.promptEndTokens, s.storedEndTokens, chunkSize), s.chainChunks);
        List<Committed> pinned = pinWindows(s, anchor);
        commits.increment();
        return pinned.isEmpty() ? 0 : flusher.flush(pinned);
    }

    /** The {@code w} chunks ending at {@code anchor} of every sliding-window group, every rank (chunk-major, rank-minor), pinned. */
    private List<Committed> pinWindows(Session s, int anchor) {
        LookupGeometry geometry = catalog.lookupGeometry(s.model, s.worldSize);
        List<Committed> pinned = new ArrayList<>();
        for (int g = 0; g < geometry.groups(); g++) {
            int window = geometry.windowChunks()[g];
            if (window < 1) {
                continue; // whole-prefix group: the store path already wrote it through
            }
            for (int chunk = Math.max(0, anchor - window); chunk < anchor; chunk++) {
                for (int rank = 0; rank < s.worldSize; rank++) {
                    ChunkKey key = new ChunkKey(s.model, s.salt, s.tags, rank, g, ChunkHash.unpack(s.chain, chunk));
                    StoredObject object = store.pinReady(key, 0, ObjectStore.ANY_LAYOUT); // a write in flight: dropped, as LMCache
                    if (object == null) {
                        missing.increment(); // evicted, or still being written: the window reaches L2 later, or not at all
                    } else {
                        pinned.add(new Committed(key, object));
                    }
                }
            }
        }
        return pinned;
    }

    /** {@code /status} {@code window_commit}. */
    public Map<String, Object> status() {
        Map<String, Object> status = new LinkedHashMap<>();
        status.put("commit_policy", settings.policy().flagValue());
        status.put("commit_anchor", settings.anchor().flagValue());
        status.put("commit_boundary_tokens", settings.boundaryTokens());
        synchronized (sessions) {
            status.put("open_sessions", sessions.size());
        }
        status.put("commits", commits.sum());
        status.put("declined", declined.sum());
        status.put("missing_objects", missing.sum());
        status.put("forgotten_sessions", forgotten.sum());
        return status;
    }

    /** The sessions table, for its gauges. */
    public BoundedTable<?> table() {
        return sessions;
    }

    public long commits() {
        return commits.sum();
    }

    public long declined() {
        return declined.sum();
    }
}
