package io.lmcache.server.events;

import io.lmcache.server.protocol.KvEventKind;
import io.lmcache.server.protocol.Reply;
import java.lang.invoke.VarHandle;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicLongArray;
import java.util.concurrent.atomic.LongAdder;

/**
 * LMCache's KV-event log (kv-events.md §5): the last {@code capacity} records of what L1 and L2 stored and removed, each with a
 * sequence number from 1, and an incarnation per server start. Writers never wait for readers and never allocate: every record
 * goes into a preallocated slot of one ring (a multi-producer ring as in the Disruptor: a seq is claimed with one atomic add, the
 * slot is written, then published with its seq as stamp). A reader copies a slot and checks its stamp before and after (a
 * seqlock), so a record a writer overwrote meanwhile reads as trimmed ({@code lost}), never as a torn record.
 *
 * <p>Slot layout, per slot {@code i}: {@code kinds[i]} (kind and medium), {@code models[i]}, {@code hashCounts[i]} hashes of
 * {@code hashLengths[i]} bytes each in {@code hashes[i * HASH_AREA ..]} (a stored record: its hash, then its parent's if
 * {@code hasParent[i]}), and a stored record's {@code chunkSize} tokens in {@code tokens[i * chunkSize ..]}.
 */
public final class KvEventLog {
    /** The default of {@code --kv-event-log-size} (LMCache's {@code DEFAULT_KV_EVENT_LOG_SIZE}). */
    public static final int DEFAULT_CAPACITY = 32_768;
    /** Room per hash: LMCache's 32-byte digests, which our chunk hashes are. */
    public static final int MAX_HASH_BYTES = 32;
    /** Hashes per removed record; a larger removal is split over several records (any split is allowed, §10.7). */
    public static final int REMOVED_PER_RECORD = 8;
    private static final int HASH_AREA = REMOVED_PER_RECORD * MAX_HASH_BYTES;
    private static final int OUR_HASH_BYTES = 32;
    /** The most records one read returns, poll or stream batch (LMCache's subscribe bound; the worker asks for this many). */
    public static final int MAX_EVENTS = 1024;
    /**
     * The most bytes of records one read returns (estimated as encoded, {@link #estimatedBytes}): a page of {@link #MAX_EVENTS}
     * records of 256-token chunks fits, longer chunks make shorter pages. The reply's {@code next_cursor} is then the last
     * record it carries, so the reader resumes right after it (kv-events.md §5: a read that stops early is a read of
     * {@code max_events} = what it returned).
     */
    public static final int MAX_REPLY_BYTES = 2 << 20;
    /** A record's encoding besides its model name, hashes and tokens: the eight keys and their small values. */
    private static final int RECORD_OVERHEAD_BYTES = 160;

    /** Low bits of {@link #kinds}: a record's {@link KvEventKind} (its ordinal plus one), or the loss marker. */
    private static final byte KIND_BITS = 0x3;
    private static final byte LOST = 3;
    /** Medium bit of {@link #kinds}: set = STORAGE (L2), clear = CPU (L1). */
    static final byte STORAGE_BIT = 0x10;

    /** Where a record's chunks live, with vLLM's medium names. */
    public enum Medium {
        CPU("CPU"), STORAGE("STORAGE");

        private final String wireName;

        Medium(String wireName) {
            this.wireName = wireName;
        }

        public String wireName() {
            return wireName;
        }
    }

    private final int capacity;
    private final int chunkSize;
    private final long incarnation;
    /** The last seq claimed by a writer. */
    private final AtomicLong claimed = new AtomicLong();
    /** Every seq up to this one is published (the readers' end). */
    private final AtomicLong published = new AtomicLong();
    /** Per slot: the seq it holds, or minus the seq being written into it; 0 = never written. */
    private final AtomicLongArray stamps;
    private final byte[] kinds;
    private final String[] models;
    private final byte[] hashCounts;
    private final byte[] hashLengths;
    private final boolean[] hasParent;
    /** A record of a salted or tagged request: its tokens were never kept, readers get its hashes only (kv-events-tenancy.md). */
    private final boolean[] hashesOnly;
    private final byte[] hashes;
    private final int[] tokens;
    /** Records appended, by {@link #kinds} code (0 unused, then the kinds, then the loss marker). */
    private final LongAdder[] appended = {new LongAdder(), new LongAdder(), new LongAdder(), new LongAdder()};
    private final LongAdder lostMarkers = new LongAdder();
    private volatile Runnable onAppend = () -> { };

    /** A log of {@code capacity} records (0: the channel is off, nothing is kept) of chunks of {@code chunkSize} tokens. */
    public KvEventLog(int capacity, int chunkSize, long incarnation) {
        if (capacity < 0) {
            throw new IllegalArgumentException("--kv-event-log-size must not be negative, got " + capacity);
        }
        this.capacity = capacity;
        this.chunkSize = chunkSize;
        this.incarnation = incarnation;
        stamps = new AtomicLongArray(capacity);
        kinds = new byte[capacity];
        models = new String[capacity];
        hashCounts = new byte[capacity];
        hashLengths = new byte[capacity];
        hasParent = new boolean[capacity];
        hashesOnly = new boolean[capacity];
        hashes = new byte[capacity * HASH_AREA];
        tokens = new int[Math.multiplyExact(capacity, chunkSize)];
    }

    public boolean enabled() {
        return capacity > 0;
    }

    public int capacity() {
        return capacity;
    }

    public int chunkSize() {
        return chunkSize;
    }

    public long incarnation() {
        return incarnation;
    }

    /** The seq of the newest readable record (0 when none). */
    public long lastSeq() {
        return published.get();
    }

    /** Records retained now. */
    public long depth() {
        return Math.min(capacity, published.get());
    }

    /** Called after appends that readers may be waiting for (the stream agent's wake-up); set once at start. */
    public void onAppend(Runnable wake) {
        this.onAppend = wake;
    }

    /** Tells the readers that records were appended (once per batch of appends, not per record). */
    public void appended() {
        onAppend.run();
    }

    // --- writers: any thread -----------------------------------------------------------------------

    /**
     * A {@code stored} record of chunk {@code chunk} of a sequence whose hash chain is {@code chain} (32 bytes per chunk; its
     * parent is the chunk before it, none for chunk 0), with the tokens {@code tokenIds[chunk * chunkSize ..]}.
     */
    public void stored(Medium medium, String model, byte[] chain, int chunk, int[] tokenIds) {
        stored(medium, model, chain, chunk, tokenIds, false);
    }

    /**
     * As {@link #stored(Medium, String, byte[], int, int[])}; {@code hashesOnly}: the chunk is a salted or tagged request's,
     * whose tokens are not kept at all and never reach a reader ({@code tokenIds} may then be null).
     */
    public void stored(Medium medium, String model, byte[] chain, int chunk, int[] tokenIds, boolean hashesOnly) {
        stored(medium, model, chain, chunk, tokenIds, chunk * chunkSize, hashesOnly);
    }

    /** As above, with the chunk's tokens at {@code tokenIds[tokenOffset ..]} (a binding keeps only its chunk's). */
    public void stored(Medium medium, String model, byte[] chain, int chunk, int[] tokenIds, int tokenOffset, boolean hashesOnly) {
        if (!enabled() || chunk < 0 || chain.length < OUR_HASH_BYTES * (chunk + 1)
                || !hashesOnly && (tokenIds == null || tokenIds.length - tokenOffset < chunkSize)) {
            return; // nothing may throw between a claim and its publish: the ring would wait for that slot forever
        }
        long seq = claim();
        int slot = slot(seq);
        kinds[slot] = (byte) (code(KvEventKind.STORED) | mediumBit(medium));
        models[slot] = model;
        hashLengths[slot] = OUR_HASH_BYTES;
        hashCounts[slot] = 1;
        hasParent[slot] = chunk > 0;
        this.hashesOnly[slot] = hashesOnly;
        putHash(slot, 0, chain, chunk);
        if (chunk > 0) {
            putHash(slot, 1, chain, chunk - 1);
        }
        if (hashesOnly) {
            Arrays.fill(tokens, slot * chunkSize, (slot + 1) * chunkSize, 0); // the slot's earlier tokens go too
        } else {
            System.arraycopy(tokenIds, tokenOffset, tokens, slot * chunkSize, chunkSize);
        }
        publish(seq, slot);
    }

    /** {@code removed} records naming {@code count} hashes (32 bytes each, hash {@code i} at {@code 32 * i}) of one model. */
    public void removed(Medium medium, String model, byte[] hashList, int count) {
        if (!enabled() || count <= 0 || hashList.length < OUR_HASH_BYTES * count) {
            return;
        }
        for (int from = 0; from < count; from += REMOVED_PER_RECORD) {
            int n = Math.min(REMOVED_PER_RECORD, count - from);
            long seq = claim();
            int slot = slot(seq);
            kinds[slot] = (byte) (code(KvEventKind.REMOVED) | mediumBit(medium));
            models[slot] = model;
            hashLengths[slot] = OUR_HASH_BYTES;
            hashCounts[slot] = (byte) n;
            hasParent[slot] = false;
            hashesOnly[slot] = false;
            for (int i = 0; i < n; i++) {
                putHash(slot, i, hashList, from + i);
            }
            publish(seq, slot);
        }
    }

    /** A loss marker: records were dropped before reaching the log; every reader past it is told {@code lost}. */
    public void lost() {
        if (!enabled()) {
            return;
        }
        long seq = claim();
        int slot = slot(seq);
        kinds[slot] = LOST;
        models[slot] = null;
        hashCounts[slot] = 0;
        lostMarkers.increment();
        publish(seq, slot);
    }

    /** Claims the next seq and waits (writers only: a writer one lap behind is finishing) until its slot is free to overwrite. */
    private long claim() {
        long seq = claimed.incrementAndGet();
        int slot = slot(seq);
        long previous = Math.max(0, seq - capacity);
        while (stamps.get(slot) != previous) {
            Thread.onSpinWait();
        }
        stamps.set(slot, -seq); // volatile: a reader that copies the slot from now on sees it change
        return seq;
    }

    private void publish(long seq, int slot) {
        appended[kinds[slot] & KIND_BITS].increment();
        // volatile, as the reads below: of two writers publishing side by side, one surely sees the other's stamp
        stamps.set(slot, seq);
        // advance the readers' end over every seq published in order; a slower writer's gap stops it, and that writer,
        // publishing later, carries the end over the seqs published behind it
        long end;
        while ((end = published.get()) < claimed.get() && stamps.get(slot(end + 1)) == end + 1) {
            published.compareAndSet(end, end + 1);
        }
    }

    private int slot(long seq) {
        return (int) ((seq - 1) % capacity);
    }

    private static byte code(KvEventKind kind) {
        return (byte) (kind.ordinal() + 1);
    }

    private static byte mediumBit(Medium medium) {
        return medium == Medium.STORAGE ? STORAGE_BIT : 0;
    }

    /** Copies hash {@code hashIndex} of {@code from} (32 bytes each) into the slot's hash {@code index}. */
    private void putHash(int slot, int index, byte[] from, int hashIndex) {
        System.arraycopy(from, OUR_HASH_BYTES * hashIndex, hashes, slot * HASH_AREA + index * MAX_HASH_BYTES, OUR_HASH_BYTES);
    }

    // --- readers -----------------------------------------------------------------------------------

    /**
     * One read's answer (kv-events.md §5): at most {@link #MAX_EVENTS} records (a larger {@code maxEvents} reads as that) and
     * about {@link #MAX_REPLY_BYTES} of them (at least one record, so a reader always moves on).
     */
    public Reply.KvEvents read(long cursor, String model, int maxEvents) {
        if (!enabled()) {
            return new Reply.KvEvents(false, incarnation, 0, false, List.of());
        }
        int limit = Math.clamp(maxEvents, 0, MAX_EVENTS);
        for (int attempt = 0; ; attempt++) {
            Reply.KvEvents answer = tryRead(cursor, model, limit);
            if (answer != null) {
                return answer;
            }
            if (attempt > 3) {
                // writers lap this reader as it copies: it has lost what it has not read, and starts again from the newest record
                long last = published.get();
                return new Reply.KvEvents(true, incarnation, last, true, List.of());
            }
        }
    }

    /** The answer, or null when a writer overwrote a record while it was copied (the caller reads again). */
    private Reply.KvEvents tryRead(long cursor, String model, int maxEvents) {
        long last = published.get();
        if (cursor > last) {
            return new Reply.KvEvents(true, incarnation, last, true, List.of());
        }
        long first = Math.max(1, last - capacity + 1);
        boolean lost = cursor + 1 < first;
        long next = Math.max(cursor, first - 1);
        List<Reply.KvEventRecord> events = new ArrayList<>();
        long bytes = 0;
        for (long seq = next + 1; seq <= last && events.size() < maxEvents && bytes < MAX_REPLY_BYTES; seq++) {
            int slot = slot(seq);
            if (stamps.get(slot) != seq) {
                return null;
            }
            byte kind = kinds[slot];
            String recordModel = models[slot];
            Reply.KvEventRecord record = (kind & KIND_BITS) == LOST || !model.equals(recordModel) ? null : copy(seq, slot, kind, recordModel);
            VarHandle.acquireFence();
            if (stamps.get(slot) != seq) {
                return null;
            }
            next = seq;
            if ((kind & KIND_BITS) == LOST) {
                lost = true;
                events.clear(); // what came before the gap may describe a world the reader cannot complete
                bytes = 0;
            } else if (record != null) {
                if (!events.isEmpty() && bytes + estimatedBytes(record) > MAX_REPLY_BYTES) {
                    next = seq - 1; // the reader resumes at this record: the reply ends before it
                    break;
                }
                events.add(record);
                bytes += estimatedBytes(record);
            }
        }
        return new Reply.KvEvents(true, incarnation, next, lost, events);
    }

    /** What a record takes encoded, at most: each token as a 5-byte int, each hash with its header, the model as UTF-8. */
    static long estimatedBytes(Reply.KvEventRecord record) {
        return RECORD_OVERHEAD_BYTES + 3L * record.modelName().length() + 34L * (record.blockHashes().size() + 1)
                + 5L * record.tokenIds().length;
    }

    private Reply.KvEventRecord copy(long seq, int slot, byte kind, String model) {
        int length = hashLengths[slot];
        int count = hashCounts[slot];
        String medium = (kind & STORAGE_BIT) != 0 ? Medium.STORAGE.wireName() : Medium.CPU.wireName();
        if ((kind & KIND_BITS) == code(KvEventKind.STORED)) {
            int[] chunkTokens = hashesOnly[slot] ? new int[0] : new int[chunkSize];
            System.arraycopy(tokens, slot * chunkSize, chunkTokens, 0, chunkTokens.length);
            byte[] parent = hasParent[slot] ? hash(slot, 1, length) : null;
            return new Reply.KvEventRecord(seq, KvEventKind.STORED, medium, model, List.of(hash(slot, 0, length)), parent, chunkTokens, chunkSize);
        }
        List<byte[]> named = new ArrayList<>(count);
        for (int i = 0; i < count && i < REMOVED_PER_RECORD; i++) {
            named.add(hash(slot, i, length));
        }
        return new Reply.KvEventRecord(seq, KvEventKind.REMOVED, medium, model, named, null, new int[0], chunkSize);
    }

    private byte[] hash(int slot, int index, int length) {
        byte[] hash = new byte[length];
        System.arraycopy(hashes, slot * HASH_AREA + index * MAX_HASH_BYTES, hash, 0, length);
        return hash;
    }

    // --- counts ------------------------------------------------------------------------------------

    /** Records appended of one kind since start, both media (the metrics). */
    public LongAdder appendedCounter(KvEventKind kind) {
        return appended[code(kind)];
    }

    public long lostMarkers() {
        return lostMarkers.sum();
    }
}
