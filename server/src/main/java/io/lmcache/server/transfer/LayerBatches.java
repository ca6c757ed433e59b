package io.lmcache.server.transfer;

import io.lmcache.server.cuda.LayerEvents;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.ArrayList;
import java.util.List;
import java.util.TreeSet;

/**
 * How a registration's layers go out in a layer-wise RETRIEVE (LMCache's {@code --layerwise-batch N}): its layers by their
 * registration index (the worker's {@code kv_caches} order, which is what {@code wait_for_layer(i)} names), in ascending
 * order, cut into batches of {@code N}. Each batch's copies end with pool event {@code leader} (its first layer) and one reply
 * frame naming the batch ({@code lmcache_driven_transfer_layerwise.py@1565d9a3}, {@code _transfer_layer_major} and
 * {@code _export_cb}).
 *
 * <p>A layer's index is the registered tensor that holds it (its first plane's): one tensor per layer for vLLM's layouts.
 * A cross-layer tensor (all layers in one) has no per-layer index, and an index past LMCache's pool of 256 events has no
 * event: such registrations are refused layer-wise mode ({@link #of} throws), as LMCache's {@code _ensure_event_pool} refuses
 * a model of more layers than its pool.
 */
public final class LayerBatches {
    /** Per kernel group index, per layer of its layout, the batch the layer goes in. */
    private final int[][] batchOf;
    private final List<int[]> batches;

    private LayerBatches(int[][] batchOf, List<int[]> batches) {
        this.batchOf = batchOf;
        this.batches = batches;
    }

    /** The batches of {@code geometry}'s layers, {@code batchSize} (> 0) layers each; throws when it has no per-layer indices. */
    public static LayerBatches of(CacheGeometry geometry, int batchSize) throws LayoutException {
        int maxKernel = geometry.kernels().stream().mapToInt(KernelGroup::index).max().orElse(-1);
        int[][] globalOf = new int[maxKernel + 1][];
        TreeSet<Integer> layers = new TreeSet<>();
        for (KernelGroup kernel : geometry.kernels()) {
            KvLayout layout = kernel.layout();
            if (layout.crossLayer()) {
                throw new LayoutException("a cross-layer KV tensor (all layers in one) has no per-layer events");
            }
            int[] global = new int[layout.numLayers()];
            for (int layer = 0; layer < global.length; layer++) {
                int tensor = layout.tensorIndex(layer, 0);
                global[layer] = kernel.tensorIds() == null ? tensor : kernel.tensorIds()[tensor];
                if (global[layer] >= LayerEvents.POOL_SIZE) {
                    throw new LayoutException("layer " + global[layer] + " is past the layer-wise event pool of " + LayerEvents.POOL_SIZE);
                }
                if (!layers.add(global[layer])) {
                    throw new LayoutException("two layers share registered tensor " + global[layer]);
                }
            }
            globalOf[kernel.index()] = global;
        }
        List<int[]> batches = new ArrayList<>();
        int[] batchOfGlobal = new int[LayerEvents.POOL_SIZE];
        List<Integer> ordered = new ArrayList<>(layers);
        for (int from = 0; from < ordered.size(); from += batchSize) {
            List<Integer> batch = ordered.subList(from, Math.min(ordered.size(), from + batchSize));
            for (int layer : batch) {
                batchOfGlobal[layer] = batches.size();
            }
            batches.add(batch.stream().mapToInt(Integer::intValue).toArray());
        }
        int[][] batchOf = new int[globalOf.length][];
        for (int k = 0; k < globalOf.length; k++) {
            if (globalOf[k] != null) {
                batchOf[k] = new int[globalOf[k].length];
                for (int layer = 0; layer < globalOf[k].length; layer++) {
                    batchOf[k][layer] = batchOfGlobal[globalOf[k][layer]];
                }
            }
        }
        return new LayerBatches(batchOf, List.copyOf(batches));
    }

    public int count() {
        return batches.size();
    }

    /** The registration indices of batch {@code b}'s layers, ascending. */
    public int[] layers(int b) {
        return batches.get(b).clone();
    }

    /** Batch {@code b}'s pool event: its first layer's ({@code leader = covered[0]}). */
    public int leader(int b) {
        return batches.get(b)[0];
    }

    /** Whether layer {@code layer} of kernel group {@code kernelIndex} is copied in batch {@code b}. */
    public boolean includes(int b, int kernelIndex, int layer) {
        return batchOf[kernelIndex][layer] == b;
    }

    /**
     * Batch {@code b}'s intermediate frame payload, little-endian int32s: {@code (first_layer, count, pool_index)} when its layers
     * are a contiguous range (the shape every layer-wise worker reads: {@code futures_layerwise.py@3ed3c8ba}
     * {@code struct.unpack("<3i", ...)}), else {@code (-1, n, leader)} followed by the n indices (the layer-major shape of
     * {@code lmcache_driven_transfer_layerwise.py@1565d9a3}).
     */
    public byte[] frame(int b) {
        return frame(batches.get(b));
    }

    static byte[] frame(int[] layers) {
        boolean contiguous = layers[layers.length - 1] - layers[0] == layers.length - 1;
        ByteBuffer out = ByteBuffer.allocate(12 + (contiguous ? 0 : 4 * layers.length)).order(ByteOrder.LITTLE_ENDIAN);
        out.putInt(contiguous ? layers[0] : -1).putInt(layers.length).putInt(layers[0]);
        if (!contiguous) {
            for (int layer : layers) {
                out.putInt(layer);
            }
        }
        return out.array();
    }
}
