package io.lmcache.server.transfer;

import static io.lmcache.server.transfer.HybridTensors.NHD;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.lmcache.server.config.EvictionPolicyName;
import io.lmcache.server.protocol.CacheKey;
import io.lmcache.server.protocol.RequestConfigs;
import io.lmcache.server.storage.ObjectStore;
import io.lmcache.server.storage.ReadyStores;
import io.lmcache.server.storage.StoreCounters;
import io.lmcache.server.storage.StoredObject;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Random;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/**
 * A RETRIEVE pins each chunk's objects as its pieces go out, never waiting inside the copy call (on a GPU it holds the
 * device's retrieve lane); while a write is in flight it pins every chunk first, waiting for the write as before.
 */
class RetrievePinningTest {
    private static final int CHUNK = 256;
    private static final long MIB = 1 << 20;
    /** Two kernel groups of one page size: one object group, one 1.5 MiB object a chunk. */
    private static final CacheGeometry GEMMA = geometry();

    private static CacheGeometry geometry() {
        try {
            return CacheGeometry.of(HybridTensors.gemmaTensors(64), NHD, HybridTensors.gemmaInfos(), CHUNK, false);
        } catch (LayoutException e) {
            throw new AssertionError(e);
        }
    }

    private static ObjectStore store() {
        return ReadyStores.of(32 * MIB, 32 * MIB, EvictionPolicyName.NOOP, TimeUnit.SECONDS.toNanos(60), TimeUnit.SECONDS.toNanos(60),
                System::nanoTime, new StoreCounters());
    }

    private static CacheKey key(long seed, int chunks) {
        Random random = new Random(seed);
        int[] tokens = new int[chunks * CHUNK];
        Arrays.setAll(tokens, i -> random.nextInt(150_000));
        return new CacheKey("m", 1, 0, tokens, 0, tokens.length, "r" + seed, "", 1, RequestConfigs.NONE);
    }

    private static int[][] ids(int chunks) {
        int[] sliding = new int[chunks * 8];
        int[] full = new int[chunks * 16];
        Arrays.setAll(sliding, i -> i);
        Arrays.setAll(full, i -> 24 + i);
        return new int[][] {sliding, full};
    }

    private static TransferPlan plan(CacheKey key, int chunks, boolean store) {
        ChunkHashes hashes = store ? ChunkHashes.deferred(key, CHUNK, chunks) : ChunkHashes.hash(key, CHUNK, chunks);
        return new TransferPlan(new ChunkRange(0, chunks), hashes, GroupParts.of(GEMMA, chunks, ids(chunks), store));
    }

    /** Reserves the first {@code chunks} chunks of {@code key}; committed unless {@code commit} is false (a write in flight). */
    private static StoredObject[] write(ObjectStore store, CacheKey key, int chunks, boolean commit) {
        TransferPlan plan = plan(key, chunks, true);
        ChunkObjects.Reserving reserving = new ChunkObjects.Reserving(store, key, plan);
        GroupPieces.emitReserving(plan, reserving, CHUNK, (tensor, tensorOffset, objectOffset, length) -> { });
        assertTrue(reserving.allFit());
        if (commit) {
            assertTrue(store.commitAll(reserving.objects(), null));
        }
        return reserving.objects();
    }

    /** The store's pinned objects at each piece of the emission. */
    private static List<Integer> emit(ObjectStore store, TransferPlan plan, ChunkObjects.Pinning pinning) {
        List<Integer> pinnedAtPiece = new ArrayList<>();
        GroupPieces.emitPinning(plan, pinning, 0, CHUNK, (tensor, tensorOffset, objectOffset, length) -> pinnedAtPiece.add(store.snapshot().pinned()));
        return pinnedAtPiece;
    }

    @Test
    void withNoWriteInFlightEachChunkIsPinnedAsItsPiecesGoOut() {
        ObjectStore store = store();
        CacheKey key = key(1, 3);
        write(store, key, 3, true);
        assertFalse(store.writesInFlight());
        TransferPlan plan = plan(key, 3, false);
        ChunkObjects.Pinning pinning = ChunkObjects.Pinning.forRetrieve(store, key, plan);
        assertEquals(0, store.snapshot().pinned(), "nothing is pinned before the copy call");
        List<Integer> pinnedAtPiece = emit(store, plan, pinning);
        assertEquals(1, pinnedAtPiece.getFirst(), "chunk 0's pieces go out before chunk 1 is pinned");
        assertEquals(3, pinnedAtPiece.getLast());
        assertTrue(pinning.allFound());
        ChunkObjects.unpinAll(store, pinning.objects(), true);
        assertEquals(0, store.snapshot().pinned());
    }

    @Test
    void aMissingChunkStopsTheEmissionThereWithWhatCameBeforeItPinned() {
        ObjectStore store = store();
        CacheKey key = key(2, 3);
        write(store, key, 2, true);
        TransferPlan plan = plan(key, 3, false);
        ChunkObjects.Pinning pinning = ChunkObjects.Pinning.forRetrieve(store, key, plan);
        List<Integer> pinnedAtPiece = emit(store, plan, pinning);
        assertFalse(pinning.allFound());
        assertEquals(2, pinnedAtPiece.getLast(), "chunks 0 and 1 went out, chunk 2 did not");
        assertNull(pinning.objects()[plan.objectIndex(2, 0)]);
        ChunkObjects.unpinAll(store, pinning.objects(), false);
        assertEquals(0, store.snapshot().pinned());
    }

    @Test
    void whileAnyWriteIsInFlightEveryChunkIsPinnedFirst() {
        ObjectStore store = store();
        CacheKey key = key(3, 2);
        write(store, key, 2, true);
        StoredObject[] other = write(store, key(4, 1), 1, false); // another request's STORE, still copying
        assertTrue(store.writesInFlight());
        TransferPlan plan = plan(key, 2, false);
        ChunkObjects.Pinning pinning = ChunkObjects.Pinning.forRetrieve(store, key, plan);
        assertEquals(2, store.snapshot().pinned(), "both chunks pinned before the copy call");
        List<Integer> pinnedAtPiece = emit(store, plan, pinning);
        assertTrue(pinnedAtPiece.stream().allMatch(n -> n == 2), "the emission pins nothing more");
        assertTrue(pinning.allFound());
        ChunkObjects.unpinAll(store, pinning.objects(), true);
        ChunkObjects.abortAll(store, other);
    }

    @Test
    void aChunkStillBeingWrittenIsWaitedForBeforeTheCopyCall() throws Exception {
        ObjectStore store = store();
        CacheKey key = key(5, 2);
        StoredObject[] writing = write(store, key, 2, false); // a STORE answered before its copy ended
        CompletableFuture<Boolean> commit = CompletableFuture.supplyAsync(() -> {
            try {
                Thread.sleep(200);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
            return store.commitAll(writing, null);
        });
        TransferPlan plan = plan(key, 2, false);
        ChunkObjects.Pinning pinning = ChunkObjects.Pinning.forRetrieve(store, key, plan);
        assertTrue(commit.get(5, TimeUnit.SECONDS), "the write was published");
        assertTrue(pinning.allFound(), "the RETRIEVE saw the STORE's chunks");
        assertNotNull(pinning.objects()[plan.objectIndex(1, 0)]);
        assertEquals(2, emit(store, plan, pinning).getLast());
        ChunkObjects.unpinAll(store, pinning.objects(), true);
    }
}
