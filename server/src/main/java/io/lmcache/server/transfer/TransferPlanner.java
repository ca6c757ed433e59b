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

    /** A full plan for an LMCache-driven STORE or RETRIEVE of a registered instance. */
    public PlanResult plan(InstanceContext context, CacheKey key, int[][] blockIds) {
        String[] why = new String[1];
        ChunkRange range = ChunkRange.of(key, chunkSize, why);
        if (range == null) {
            return new PlanResult.Refused("bad_range", why[0]);
        }
        if (!key.hasWorker() || key.workerId() >= Math.max(key.worldSize(), 1)) {
            return new PlanResult.Refused("bad_worker_id", "worker_id " + key.workerId() + " is not a kv rank of world size "
                    + key.worldSize());
        }
        if (blockIds.length != 1) {
            return new PlanResult.Refused("bad_block_ids", blockIds.length + " KV-cache groups of block ids; this server serves one");
        }
        KvLayout layout = context.layout();
        int blocksPerChunk = layout.blocksPerChunk(chunkSize);
        int[] blocks = blockIds[0];
        long needed = (long) range.count() * blocksPerChunk;
        if (blocks.length < needed) {
            return new PlanResult.Refused("bad_block_ids", blocks.length + " block ids for " + range.count() + " chunk(s) of "
                    + blocksPerChunk + " blocks");
        }
        for (int i = 0; i < needed; i++) {
            if (blocks[i] < 0 || blocks[i] >= layout.numBlocks()) {
                return new PlanResult.Refused("bad_block_ids", "block id " + blocks[i] + " is outside 0.." + (layout.numBlocks() - 1));
            }
        }
        String dead = context.copyPath().checkAlive();
        if (dead != null) {
            return new PlanResult.Refused("tensors_gone", dead);
        }
        TransferPlan.GroupPart part = new TransferPlan.GroupPart(0, blocks, blocksPerChunk, layout.objectBytes(chunkSize), layout.format());
        return new PlanResult.Planned(new TransferPlan(range, ChunkHashes.hash(key, chunkSize, range.endChunk()), List.of(part)));
    }
}
