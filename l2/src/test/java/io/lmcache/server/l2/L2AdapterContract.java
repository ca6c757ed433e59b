package io.lmcache.server.l2;

import static org.awaitility.Awaitility.await;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.Set;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * The L2 adapter contract ({@link L2Adapter}), run by every adapter through a subclass that says how to open one (Caffeine's
 * {@code CacheSpec}/{@code CacheProvider} split): one-shot results, per-key bitmaps, unlock that cannot fail, buffers untouched
 * after a result is taken, delete that skips locked keys, close with work in flight. Each test opens a fresh adapter on keys no
 * other test uses, so a store shared by the tests of a class (one redis-server) does not mix them.
 */
public abstract class L2AdapterContract {
    /** One key space per test (a counter, not a clock): keys of another test never collide. */
    private static final AtomicLong RUNS = new AtomicLong(new Random().nextLong() >>> 24);
    private static final Duration ANSWER = Duration.ofSeconds(20);
    private static final int BYTES = 8 * 1024;

    private final long run = RUNS.incrementAndGet();
    private final Arena arena = Arena.ofShared();
    private final AtomicInteger storeSignals = new AtomicInteger();
    private final AtomicInteger lookupSignals = new AtomicInteger();
    private final AtomicInteger loadSignals = new AtomicInteger();
    protected L2Adapter adapter;

    /** A new, ready adapter (connected, where it connects): every test gets its own and closes it. */
    protected abstract L2Adapter open() throws Exception;

    @BeforeEach
    void openAdapter() throws Exception {
        adapter = open();
        adapter.setCompletionSignals(new CompletionSignals(storeSignals::incrementAndGet, lookupSignals::incrementAndGet,
                loadSignals::incrementAndGet));
    }

    @AfterEach
    void closeAdapter() {
        adapter.close();
        arena.close();
    }

    // --- the contract --------------------------------------------------------------------------

    @Test
    void everyResultIsTakenOnceAndSignalled() {
        List<L2Key> keys = keys(0, 3);
        long store = adapter.submitStore(keys, objects(0, 3));
        StoreResult stored = awaitStore(store);
        assertEquals(new StoreResult(true, 3L * BYTES), stored);
        assertFalse(adapter.popCompletedStores().containsKey(store), "a store result is popped once");
        long lookup = adapter.submitLookupAndLock(keys, sizes());
        assertNotEquals(store, lookup, "task ids are unique per adapter");
        assertEquals("111", awaitLookup(lookup).toString());
        assertNull(adapter.queryLookupAndLock(lookup), "a lookup result is handed out once");
        long load = adapter.submitLoad(keys, blanks(3, (byte) 0));
        assertEquals(3, Set.of(store, lookup, load).size(), "task ids are unique per adapter");
        assertEquals("111", awaitLoad(load).toString());
        assertNull(adapter.queryLoad(load), "a load result is handed out once");
        assertNull(adapter.queryLoad(lookup), "a lookup's id is no load's");
        adapter.submitUnlock(keys);
        assertTrue(storeSignals.get() >= 1 && lookupSignals.get() >= 1 && loadSignals.get() >= 1,
                "each kind of result was signalled: " + storeSignals + " " + lookupSignals + " " + loadSignals);
    }

    @Test
    void lookupsAndLoadsAnswerPerKey() {
        List<L2Key> stored = List.of(key(0), key(2), key(4));
        List<MemorySegment> objects = List.of(object(0), object(2), object(4));
        assertTrue(awaitStore(adapter.submitStore(stored, objects)).ok());
        assertEquals("10101", awaitLookup(adapter.submitLookupAndLock(keys(0, 5), sizes())).toString(), "bit i answers for keys[i]");
        List<MemorySegment> buffers = blanks(5, (byte) 0x5a);
        assertEquals("10101", awaitLoad(adapter.submitLoad(keys(0, 5), buffers)).toString());
        for (int i : new int[] {0, 2, 4}) {
            assertArrayEquals(bytes(object(i)), bytes(buffers.get(i)), "key " + i + " loaded in full");
        }
        for (int i : new int[] {1, 3}) {
            assertTrue(allEqual(buffers.get(i), (byte) 0x5a), "a miss leaves its buffer as it was: key " + i);
        }
        assertEquals("0", awaitLoad(adapter.submitLoad(List.of(key(2)), blanks(1, BYTES / 2, (byte) 0))).toString(),
                "a buffer of another size than the stored object is a miss");
        assertEquals("", awaitLookup(adapter.submitLookupAndLock(List.of(), sizes())).toString(), "a task of no keys answers too");
        assertEquals(new StoreResult(true, 0), awaitStore(adapter.submitStore(List.of(), List.of())));
        adapter.submitUnlock(stored);
    }

    @Test
    void unlockCannotFailAndLocksCountPerLookup() {
        List<L2Key> keys = keys(0, 1);
        adapter.submitUnlock(keys(100, 3)); // never stored nor locked: nothing happens
        assertTrue(awaitStore(adapter.submitStore(keys, objects(0, 1))).ok());
        assertEquals("1", awaitLookup(adapter.submitLookupAndLock(keys, sizes())).toString());
        assertEquals("1", awaitLookup(adapter.submitLookupAndLock(keys, sizes())).toString());
        adapter.submitUnlock(keys);
        assertEquals(List.of(), adapter.delete(keys), "two lookups locked it twice: one unlock leaves it locked");
        adapter.submitUnlock(keys);
        adapter.submitUnlock(keys); // one more than locked: the count never goes below zero
        assertEquals(keys, adapter.delete(keys), "unlocked as often as locked: deletable");
        assertEquals("0", awaitLookup(adapter.submitLookupAndLock(keys, sizes())).toString(), "a miss is not locked");
        assertEquals(List.of(), adapter.delete(keys), "gone already: nothing removed");
    }

    @Test
    void buffersAreNeverTouchedAfterTheirResultIsTaken() {
        List<L2Key> keys = keys(0, 2);
        List<MemorySegment> objects = objects(0, 2);
        assertTrue(awaitStore(adapter.submitStore(keys, objects)).ok());
        byte[] original = bytes(objects.getFirst());
        objects.getFirst().fill((byte) 0x11); // the caller reuses the source: what was stored stays as it was
        List<MemorySegment> buffers = blanks(2, (byte) 0);
        assertEquals("11", awaitLoad(adapter.submitLoad(keys, buffers)).toString());
        assertArrayEquals(original, bytes(buffers.getFirst()), "the store read its source before its result");
        buffers.forEach(buffer -> buffer.fill((byte) 0x22));
        // more work on the same keys: none of it may reach the buffers of the task whose result was taken
        assertTrue(awaitStore(adapter.submitStore(keys, objects(10, 2))).ok());
        assertEquals("11", awaitLoad(adapter.submitLoad(keys, blanks(2, (byte) 0))).toString());
        assertEquals("11", awaitLookup(adapter.submitLookupAndLock(keys, sizes())).toString());
        adapter.submitUnlock(keys);
        buffers.forEach(buffer -> assertTrue(allEqual(buffer, (byte) 0x22), "untouched after its result was taken"));
    }

    @Test
    void deleteSkipsLockedKeysAndCountsWhatItRemoved() {
        List<L2Key> keys = keys(0, 2);
        assertTrue(awaitStore(adapter.submitStore(keys, objects(0, 2))).ok());
        long before = adapter.usage().totalBytesUsed();
        assertEquals("11", awaitLookup(adapter.submitLookupAndLock(keys, sizes())).toString());
        assertEquals(List.of(), adapter.delete(keys), "both are locked");
        adapter.submitUnlock(keys.subList(0, 1));
        assertEquals(keys.subList(0, 1), adapter.delete(keys), "only the unlocked key goes");
        assertEquals(before - BYTES, adapter.usage().totalBytesUsed(), "and is no longer counted");
        assertEquals("01", awaitLookup(adapter.submitLookupAndLock(keys, sizes())).toString());
        adapter.submitUnlock(keys);
        adapter.submitUnlock(keys.subList(1, 2));
        assertEquals(keys.subList(1, 2), adapter.delete(keys));
    }

    @Test
    void closeWithWorkInFlightAnswersEveryTaskAndLeavesTheBuffersAlone() {
        int n = 16;
        List<L2Key> stored = keys(0, n);
        assertTrue(awaitStore(adapter.submitStore(stored, objects(0, n))).ok());
        long store = adapter.submitStore(keys(n, n), objects(n, n));
        List<MemorySegment> buffers = blanks(n, (byte) 0);
        long load = adapter.submitLoad(stored, buffers);
        long lookup = adapter.submitLookupAndLock(stored, sizes());
        adapter.close();
        buffers.forEach(buffer -> buffer.fill((byte) 0x33)); // the caller may free or reuse them once close returned
        assertEquals(n, awaitLoad(load).size(), "a task in flight at close still answers (loaded or not)");
        assertEquals(n, awaitLookup(lookup).size());
        awaitStore(store);
        buffers.forEach(buffer -> assertTrue(allEqual(buffer, (byte) 0x33), "no copy touches a buffer after close returned"));

        StoreResult late = awaitStore(adapter.submitStore(keys(3 * n, 1), objects(3 * n, 1)));
        assertFalse(late.ok(), "after close a store fails at once");
        assertEquals(0L, late.bytesTransferred());
        assertEquals("00", awaitLookup(adapter.submitLookupAndLock(stored.subList(0, 2), sizes())).toString(), "a lookup finds nothing");
        List<MemorySegment> lateBuffers = blanks(2, (byte) 0x44);
        assertEquals("00", awaitLoad(adapter.submitLoad(stored.subList(0, 2), lateBuffers)).toString(), "a load loads nothing");
        lateBuffers.forEach(buffer -> assertTrue(allEqual(buffer, (byte) 0x44)));
        adapter.submitUnlock(stored); // still cannot fail
        adapter.close(); // a second close does nothing
    }

    // --- driving an adapter (as the controllers do: submit, then poll the one-shot result) ---------------------------------

    /** Keys of this test only: {@code count} of them from {@code from}. */
    protected final List<L2Key> keys(int from, int count) {
        List<L2Key> keys = new ArrayList<>();
        for (int i = from; i < from + count; i++) {
            keys.add(key(i));
        }
        return keys;
    }

    protected final L2Key key(int i) {
        return L2Key.of("contract/model", L2Key.packKvRank(1, 0), 0, new L2Hash(run, i, 0, 0), "");
    }

    private static Map<Integer, Long> sizes() {
        Map<Integer, Long> sizes = new HashMap<>();
        sizes.put(0, (long) BYTES);
        return sizes;
    }

    /** Key {@code i}'s object: bytes that differ per key and per test. */
    private MemorySegment object(int i) {
        MemorySegment segment = arena.allocate(BYTES, 4096);
        byte[] data = new byte[BYTES];
        new Random(run * 31 + i).nextBytes(data);
        MemorySegment.copy(data, 0, segment, ValueLayout.JAVA_BYTE, 0, BYTES);
        return segment;
    }

    private List<MemorySegment> objects(int from, int count) {
        List<MemorySegment> out = new ArrayList<>();
        for (int i = from; i < from + count; i++) {
            out.add(object(i));
        }
        return out;
    }

    private List<MemorySegment> blanks(int count, byte fill) {
        return blanks(count, BYTES, fill);
    }

    private List<MemorySegment> blanks(int count, int bytes, byte fill) {
        List<MemorySegment> out = new ArrayList<>();
        for (int i = 0; i < count; i++) {
            out.add(arena.allocate(bytes, 4096).fill(fill));
        }
        return out;
    }

    private static byte[] bytes(MemorySegment segment) {
        return segment.toArray(ValueLayout.JAVA_BYTE);
    }

    private static boolean allEqual(MemorySegment segment, byte value) {
        for (byte b : bytes(segment)) {
            if (b != value) {
                return false;
            }
        }
        return true;
    }

    /** Popped stores are kept here: a pop hands out every finished store, this test's others too. */
    private final Map<Long, StoreResult> popped = new HashMap<>();
    private final Set<Long> taken = new HashSet<>();

    private StoreResult awaitStore(long task) {
        await("store " + task).atMost(ANSWER).pollInterval(Duration.ofMillis(2)).until(() -> {
            Map<Long, StoreResult> batch = adapter.popCompletedStores();
            for (Long id : batch.keySet()) {
                assertFalse(taken.contains(id) || popped.containsKey(id), "store " + id + " was handed out twice");
            }
            popped.putAll(batch);
            return popped.containsKey(task);
        });
        taken.add(task);
        return popped.remove(task);
    }

    private Bitmap awaitLookup(long task) {
        Bitmap[] result = new Bitmap[1];
        await("lookup " + task).atMost(ANSWER).pollInterval(Duration.ofMillis(2)).until(() -> (result[0] = adapter.queryLookupAndLock(task))
                != null);
        return result[0];
    }

    private Bitmap awaitLoad(long task) {
        Bitmap[] result = new Bitmap[1];
        await("load " + task).atMost(ANSWER).pollInterval(Duration.ofMillis(2)).until(() -> (result[0] = adapter.queryLoad(task)) != null);
        return result[0];
    }
}
