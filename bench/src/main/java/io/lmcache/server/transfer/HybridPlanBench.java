package io.lmcache.server.transfer;

import java.util.Collections;
import io.lmcache.server.config.EvictionPolicyName;
import io.lmcache.server.protocol.CacheKey;
import io.lmcache.server.protocol.RequestConfigs;
import io.lmcache.server.protocol.DType;
import io.lmcache.server.protocol.EngineGroupInfo;
import io.lmcache.server.protocol.LayoutHints;
import io.lmcache.server.protocol.TensorWrapper;
import io.lmcache.server.storage.ObjectStore;
import io.lmcache.server.storage.SlabAllocator;
import io.lmcache.server.storage.StoreCounters;
import io.lmcache.server.storage.StoredObject;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.Random;
import java.util.concurrent.TimeUnit;

/**
 * The CPU side of a hybrid STORE and RETRIEVE against a plain one of the same bytes (issue 30): the handler's planning
 * (range, chunk hashes, per-object-group parts), the reservations or pins of every (chunk, group) object, the piece plan
 * handed to a sink that only counts (no copy, so the figure is the per-group overhead, not the memory's speed), and the
 * commit or unpin. Layouts as hybrid_check.py's (Gemma-like: 8 sliding-window layers of 32-token blocks, 4 x 256, window 4
 * chunks, and 8 full-attention layers of 16-token blocks, 4 x 512; Qwen-like at chunk 544: 3 Mamba layers and 2
 * full-attention ones) and plain layouts of the same bytes per chunk and piece size. In this package for the
 * package-private parts of the plan (GroupParts); run by {@code bench/run-hybrid-plan.sh}.
 */
public final class HybridPlanBench {
    private HybridPlanBench() {}

    record Model(String name, int chunkSize, CacheGeometry geometry, int[] blocksPerChunk) {}

    public static void main(String[] args) throws Exception {
        int seconds = args.length > 0 ? Integer.parseInt(args[0]) : 2;
        int[] chunkCounts = args.length > 1 ? Arrays.stream(args[1].split(",")).mapToInt(Integer::parseInt).toArray() : new int[] {4, 64};
        boolean[] patterns = args.length > 2 && args[2].equals("consecutive") ? new boolean[] {false} : new boolean[] {false, true};
        List<Model> models = List.of(gemma(), plainLike("plain, Gemma-like bytes (12 layers [2, nb, 16, 4, 512])", 256, 12, 16, 4, 512),
                qwen(), plainLike("plain, Qwen-like bytes (chunk 544: 5 layers [2, nb, 544, 1, 128])", 544, 5, 544, 1, 128));
        System.out.println("| model | chunks | blocks | STORE µs p50 (plan + hash, reserve, pieces + commit) | RETRIEVE µs p50 (plan + pin + pieces + unpin)"
                + " | pieces per request | objects per request |");
        System.out.println("|---|---:|---|---:|---:|---:|---:|");
        // a first pass over every cell unprinted: the JIT then compiles with every model's profile before any is measured
        for (Model model : models) {
            for (int chunks : chunkCounts) {
                measure(model, chunks, false, 1);
            }
        }
        for (Model model : models) {
            for (int chunks : chunkCounts) {
                for (boolean scattered : patterns) {
                    System.out.println(measure(model, chunks, scattered, seconds));
                }
            }
        }
    }

    private static String measure(Model model, int chunks, boolean scattered, int seconds) {
        int groups = model.geometry().kernels().size();
        int[][] src = new int[groups][];
        int[][] dst = new int[groups][];
        Random random = new Random(30);
        for (int g = 0; g < groups; g++) {
            int n = chunks * model.blocksPerChunk()[g];
            List<Integer> ids = new ArrayList<>();
            for (int i = 1; i <= 2 * n; i++) {
                ids.add(i);
            }
            if (scattered) {
                Collections.shuffle(ids, random);
            }
            src[g] = ids.subList(0, n).stream().mapToInt(Integer::intValue).toArray();
            dst[g] = ids.subList(n, 2 * n).stream().mapToInt(Integer::intValue).toArray();
        }
        long objectBytes = model.geometry().largestObjectBytes();
        long region = Long.highestOneBit(objectBytes * 2 - 1) << 1;
        long poolBytes = region * (chunks * model.geometry().objects().size() + 4L);
        ObjectStore store = new ObjectStore(new SlabAllocator(poolBytes, region), poolBytes, EvictionPolicyName.LRU,
                TimeUnit.SECONDS.toNanos(600), TimeUnit.SECONDS.toNanos(300), System::nanoTime, new StoreCounters());
        for (int r = 0; r < poolBytes / region; r++) {
            store.addReadyRegion(r);
        }
        int[] tokens = new int[chunks * model.chunkSize()];
        for (int i = 0; i < tokens.length; i++) {
            tokens[i] = random.nextInt(150_000);
        }
        long[] counts = new long[2];
        PieceSink sink = (tensor, tensorOffset, objectOffset, length) -> {
            counts[0]++;
            counts[1] += length;
        };
        // per measured round: STORE, RETRIEVE, then STORE's plan, reserve and pieces, commit (medians reported: a loaded host's
        // preemptions land in a few rounds' tails)
        long[][] samples = new long[5][200_000];
        int rounds = 0;
        long deadlineNs = System.nanoTime() + TimeUnit.SECONDS.toNanos(seconds);
        long warmupEndNs = System.nanoTime() + TimeUnit.SECONDS.toNanos(seconds);
        boolean measuring = false;
        long piecesPerRequest = 0;
        int objects = 0;
        while (true) {
            long now = System.nanoTime();
            if (!measuring && now - warmupEndNs > 0) {
                measuring = true;
                rounds = 0;
                deadlineNs = now + TimeUnit.SECONDS.toNanos(seconds);
            } else if (measuring && now - deadlineNs > 0) {
                break;
            }
            tokens[0] = rounds; // a new prefix each round: every hash new
            CacheKey key = new CacheKey("bench/" + model.name(), 1, 0, tokens, 0, tokens.length, "r", "", 1, RequestConfigs.NONE);
            long t0 = System.nanoTime();
            TransferPlan plan = plan(model, key, src, true);
            long tPlan = System.nanoTime();
            counts[0] = 0;
            ChunkObjects.Reserving reserving = new ChunkObjects.Reserving(store, key, plan);
            GroupPieces.emitReserving(plan, reserving, model.chunkSize(), sink);
            StoredObject[] reserved = reserving.objects();
            long tEmit = System.nanoTime();
            plan.hashes().complete();
            store.commitAll(reserved, null);
            long t1 = System.nanoTime();
            if (measuring && rounds < samples[0].length) {
                samples[0][rounds] = t1 - t0;
                samples[2][rounds] = tPlan - t0;
                samples[3][rounds] = tEmit - tPlan;
                samples[4][rounds] = t1 - tEmit;
            }
            piecesPerRequest = counts[0];
            objects = (int) Arrays.stream(reserved).filter(o -> o != null).count();
            TransferPlan back = plan(model, key, dst, false);
            StoredObject[] pinned = ChunkObjects.pinAll(store, key, back);
            GroupPieces.emit(back, pinned, 0, model.chunkSize(), sink);
            ChunkObjects.unpinAll(store, pinned, true);
            long t2 = System.nanoTime();
            if (measuring && rounds < samples[0].length) {
                samples[1][rounds] = t2 - t1;
            }
            rounds++;
            store.clear(true);
        }
        int n = Math.min(rounds, samples[0].length);
        double[] p50 = new double[5];
        for (int i = 0; i < 5; i++) {
            long[] sorted = Arrays.copyOf(samples[i], n);
            Arrays.sort(sorted);
            p50[i] = sorted[n / 2] / 1e3;
        }
        return String.format(Locale.ROOT, "| %s | %d | %s | %.1f (%.1f + %.1f + %.1f) | %.1f | %d | %d |", model.name(), chunks,
                scattered ? "scattered" : "consecutive", p50[0], p50[2], p50[3], p50[4], p50[1], piecesPerRequest, objects);
    }

    /** TransferPlanner.plan's work less the registration checks (block bounds, the worker's memory): range, hashes, parts. */
    private static TransferPlan plan(Model model, CacheKey key, int[][] blockIds, boolean store) {
        ChunkRange range = ChunkRange.of(key, model.chunkSize(), new String[1]);
        List<TransferPlan.GroupPart> parts = GroupParts.of(model.geometry(), range.count(), blockIds, store);
        return new TransferPlan(range, TransferPlanner.hashes(key, model.chunkSize(), range.endChunk(), store), parts);
    }

    private static TensorWrapper.CpuShm nhd(int blocks, int blockSize, int heads, int headSize) {
        long[] shape = {2, blocks, blockSize, heads, headSize};
        long[] stride = {(long) blocks * blockSize * heads * headSize, (long) blockSize * heads * headSize, (long) heads * headSize, headSize, 1};
        return new TensorWrapper.CpuShm("/bench", 2L * shape[0] * shape[1] * shape[2] * shape[3] * shape[4], DType.BFLOAT16, shape, stride, 0, "");
    }

    /** [nb, 2, bs, heads, head size] (block axis 0), as hybrid_check's Qwen-like groups. */
    private static TensorWrapper.CpuShm blockFirst(int blocks, int blockSize, int heads, int headSize) {
        long[] shape = {blocks, 2, blockSize, heads, headSize};
        long[] stride = {2L * blockSize * heads * headSize, (long) blockSize * heads * headSize, (long) heads * headSize, headSize, 1};
        return new TensorWrapper.CpuShm("/bench", 2L * blocks * 2 * blockSize * heads * headSize, DType.BFLOAT16, shape, stride, 0, "");
    }

    private static Model gemma() throws LayoutException {
        int blocks = 2 * 64 * 16 + 1;
        List<TensorWrapper> wrappers = new ArrayList<>();
        for (int layer = 0; layer < 16; layer++) {
            wrappers.add(layer % 2 == 0 ? nhd(blocks, 32, 4, 256) : nhd(blocks, 16, 4, 512));
        }
        int[] sliding = {0, 2, 4, 6, 8, 10, 12, 14};
        int[] full = {1, 3, 5, 7, 9, 11, 13, 15};
        List<EngineGroupInfo> infos = List.of(new EngineGroupInfo(0, sliding, 32, 4 * 256, 0, false),
                new EngineGroupInfo(1, full, 16, EngineGroupInfo.FULL_ATTENTION, 0, false));
        CacheGeometry geometry = CacheGeometry.of(wrappers, new LayoutHints("NHD", 0, 0, 0), infos, 256, true);
        return new Model("Gemma-like hybrid (2 kernel groups, 2 object groups)", 256, geometry, new int[] {256 / 32, 256 / 16});
    }

    private static Model qwen() throws LayoutException {
        int n = 544;
        int blocks = 2 * 64 + 1;
        List<TensorWrapper> wrappers = new ArrayList<>();
        for (int layer = 0; layer < 5; layer++) {
            wrappers.add(blockFirst(blocks, n, 1, layer < 3 ? 128 : 256));
        }
        List<EngineGroupInfo> infos = List.of(new EngineGroupInfo(0, new int[] {0, 1, 2}, n, n, 0, true),
                new EngineGroupInfo(1, new int[] {3, 4}, n, EngineGroupInfo.FULL_ATTENTION, 0, false));
        CacheGeometry geometry = CacheGeometry.of(wrappers, new LayoutHints("NHD", 0, 0, 0), infos, n, true);
        return new Model("Qwen-like hybrid (Mamba + attention, chunk 544)", n, geometry, new int[] {1, 1});
    }

    private static Model plainLike(String name, int chunkSize, int layers, int blockSize, int heads, int headSize) throws LayoutException {
        int blocks = 2 * 64 * (chunkSize / blockSize) + 1;
        List<TensorWrapper> wrappers = new ArrayList<>();
        for (int layer = 0; layer < layers; layer++) {
            wrappers.add(nhd(blocks, blockSize, heads, headSize));
        }
        CacheGeometry geometry = CacheGeometry.of(wrappers, new LayoutHints("NHD", 0, 0, 0), List.of(), chunkSize, true);
        return new Model(name, chunkSize, geometry, new int[] {chunkSize / blockSize});
    }
}
