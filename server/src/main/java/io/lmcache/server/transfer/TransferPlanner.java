package io.lmcache.server.transfer;

import io.lmcache.server.protocol.CacheKey;
import java.util.List;

/**
 * Validates a transfer request against a registration and builds its {@link TransferPlan}: the
 * token range, the worker's rank, the block ids (one list per object group), and that the
 * worker's memory is still there. Shared by both transfer modules.
 */
public final class TransferPlanner {
    private final int chunkSize;

    public TransferPlanner(int chunkSize) {
        this.chunkSize = chunkSize;
    }

    public int chunkSize() {
        return chunkSize;
    }

    /** The key's chunks and hashes, with no blocks (engine-driven transfers, where the worker copies). */
    public PlanResult keyPlan(CacheKey key) {
        String[] why = new String[1];
        ChunkRange range = ChunkRange.of(key, chunkSize, why);
        if (range == null) {
            return new PlanResult.Refused("bad_range", why[0]);
        }
        if (!key.hasWorker() || key.workerId() >= Math.max(1, key.worldSize())) {
            return new PlanResult.Refused("bad_worker_id", "worker_id " + key.workerId() + " is not a kv rank of world size "
                    + key.worldSize());
        }
        return new PlanResult.Planned(new TransferPlan(range, ChunkHashes.hash(key, chunkSize, range.endChunk()), List.of()));
    }

    /**
     * A full plan for an LMCache-driven STORE ({@code store}) or RETRIEVE of a registered instance:
     * one block list per kernel group, each long enough for every chunk of the range (fail closed
     * otherwise, hybrid-and-l2.md §A.3.3), its kept ids inside the group's tensors.
     */
    public PlanResult plan(InstanceContext context, CacheKey key, int[][] blockIds, boolean store) {
        return plan(context, key, blockIds, store, 0);
    }

    /** As above; {@code requestedSkip}: a RETRIEVE's {@code skip_first_n_tokens} (SGLang's placeholders: {@link NullPages}). */
    public PlanResult plan(InstanceContext context, CacheKey key, int[][] blockIds, boolean store, int requestedSkip) {
        String[] why = new String[1];
        ChunkRange range = ChunkRange.of(key, chunkSize, why);
        if (range == null) {
            return new PlanResult.Refused("bad_range", why[0]);
        }
        if (!key.hasWorker() || key.workerId() >= Math.max(key.worldSize(), 1)) {
            return new PlanResult.Refused("bad_worker_id", "worker_id " + key.workerId() + " is not a kv rank of world size "
                    + key.worldSize());
        }
        CacheGeometry geometry = context.geometry();
        if (blockIds.length != geometry.blockLists()) {
            return new PlanResult.Refused("bad_block_ids", blockIds.length + " lists of block ids for " + geometry.blockLists()
                    + " kernel group(s)");
        }
        for (KernelGroup kernel : geometry.kernels()) {
            String bad = checkBlocks(kernel, blockIds[kernel.index()], range.count());
            if (bad != null) {
                return new PlanResult.Refused("bad_block_ids", bad);
            }
            String padding = NullPages.check(kernel, blockIds[kernel.index()], range.count() * kernel.blocksPerChunk(), requestedSkip, store);
            if (padding != null) {
                return new PlanResult.Refused("null_page", padding);
            }
        }
        String dead = context.copyPath().checkAlive();
        if (dead != null) {
            return new PlanResult.Refused("tensors_gone", dead);
        }
        List<TransferPlan.GroupPart> parts = GroupParts.of(geometry, range.count(), blockIds, store);
        return new PlanResult.Planned(new TransferPlan(range, hashes(key, chunkSize, range.endChunk(), store), parts));
    }

    /** A plan's chain: a STORE hashes each chunk as its copy is planned (its first chunks' copies overlap the rest's hashing). */
    static ChunkHashes hashes(CacheKey key, int chunkSize, int endChunk, boolean store) {
        return store ? ChunkHashes.deferred(key, chunkSize, endChunk) : ChunkHashes.hash(key, chunkSize, endChunk);
    }

    /** Null when the list covers every chunk and its kept ids are blocks of the group's tensors, else why not. */
    private static String checkBlocks(KernelGroup kernel, int[] blocks, int chunks) {
        int perChunk = kernel.blocksPerChunk();
        long needed = (long) chunks * perChunk;
        String group = geometryName(kernel);
        if (blocks.length < needed) {
            return blocks.length + " block ids" + group + " for " + chunks + " chunk(s) of " + perChunk + " blocks";
        }
        int numBlocks = kernel.layout().numBlocks();
        for (int j = 0; j < chunks; j++) {
            for (int b = j * perChunk + kernel.firstKept(); b < (j + 1) * perChunk; b++) {
                if (blocks[b] < 0 || blocks[b] >= numBlocks) {
                    return "block id " + blocks[b] + group + " is outside 0.." + (numBlocks - 1);
                }
            }
        }
        return null;
    }

    private static String geometryName(KernelGroup kernel) {
        return kernel.index() == 0 ? "" : " of kernel group " + kernel.index();
    }
}
