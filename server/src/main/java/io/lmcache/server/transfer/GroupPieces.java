package io.lmcache.server.transfer;

import io.lmcache.server.storage.StoredObject;
import java.util.function.IntPredicate;

/**
 * Emits the copies of a planned transfer, for either copy path: per chunk and object group that
 * has an object, each kernel group's kept blocks go to (or come from) its segment of the object.
 */
public final class GroupPieces {
    private GroupPieces() {}

    /** {@code skipTokens} of the range's head are not written (RETRIEVE's skip; 0 for STORE). */
    public static void emit(TransferPlan plan, StoredObject[] objects, int skipTokens, int chunkSize, PieceSink sink) {
        for (int j = 0; j < plan.range().count(); j++) {
            emitChunk(plan, objects, j, skipTokens, chunkSize, sink);
        }
    }

    /**
     * A STORE's pieces, each chunk's objects reserved (and so its hash computed) just before its pieces go out: the copy
     * engine copies the first chunks while the later ones are hashed. Ends at the first chunk without room.
     */
    public static void emitReserving(TransferPlan plan, ChunkObjects.Reserving reserving, int chunkSize, PieceSink sink) {
        for (int j = 0; j < plan.range().count(); j++) {
            boolean fit = reserving.take(j);
            emitChunk(plan, reserving.objects(), j, 0, chunkSize, sink);
            if (!fit) {
                return;
            }
        }
    }

    /**
     * A RETRIEVE's pieces, each chunk's objects pinned just before its pieces go out: the copy engine copies the first chunks
     * while the later ones are looked up. Ends before the first chunk with an object missing (nothing of it is copied).
     */
    public static void emitPinning(TransferPlan plan, ChunkObjects.Pinning pinning, int skipTokens, int chunkSize, PieceSink sink) {
        for (int j = 0; j < plan.range().count(); j++) {
            if (!pinning.pin(j)) {
                return;
            }
            emitChunk(plan, pinning.objects(), j, skipTokens, chunkSize, sink);
        }
    }

    /**
     * A layer-wise RETRIEVE's pieces of layer batch {@code batch}: those layers of every chunk and object group, so the batch's
     * event covers exactly them (LMCache's layer-major loop, {@code lmcache_driven_transfer_layerwise.py@1565d9a3}).
     */
    public static void emitLayers(TransferPlan plan, StoredObject[] objects, int skipTokens, int chunkSize, LayerBatches batches, int batch,
            PieceSink sink) {
        LayerSelection selection = (kernel, layer) -> batches.includes(batch, kernel, layer);
        for (int j = 0; j < plan.range().count(); j++) {
            emitChunk(plan, objects, j, skipTokens, chunkSize, selection, sink);
        }
    }

    /** The layers a copy moves: layer {@code layer} of kernel group {@code kernelIndex} or not. */
    @FunctionalInterface
    private interface LayerSelection {
        boolean includes(int kernelIndex, int layer);
    }

    private static void emitChunk(TransferPlan plan, StoredObject[] objects, int j, int skipTokens, int chunkSize, PieceSink sink) {
        emitChunk(plan, objects, j, skipTokens, chunkSize, null, sink);
    }

    private static void emitChunk(TransferPlan plan, StoredObject[] objects, int j, int skipTokens, int chunkSize, LayerSelection selection,
            PieceSink sink) {
        int skipInChunk = Math.clamp((long) skipTokens - (long) j * chunkSize, 0, chunkSize);
        for (int g = 0; g < plan.parts().size(); g++) {
            StoredObject object = objects[plan.objectIndex(j, g)];
            if (object == null) {
                continue;
            }
            TransferPlan.GroupPart part = plan.parts().get(g);
            ObjectGroup group = part.group();
            for (int i = 0; i < group.kernels().size(); i++) {
                KernelGroup kernel = group.kernels().get(i);
                PiecePlanner.ChunkBlocks blocks = new PiecePlanner.ChunkBlocks(part.blockIds()[i],
                        j * kernel.blocksPerChunk() + kernel.firstKept(), kernel.blocksKept());
                IntPredicate layers = selection == null ? null : layer -> selection.includes(kernel.index(), layer);
                PiecePlanner.chunk(kernel.layout(), kernel.tensorIds(), blocks, SkipRule.keptTokensToSkip(kernel, skipInChunk),
                        object.offset() + group.segmentOffsets()[i], layers, sink);
            }
        }
    }
}
