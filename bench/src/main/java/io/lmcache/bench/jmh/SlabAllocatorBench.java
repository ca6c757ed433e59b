package io.lmcache.bench.jmh;

import io.lmcache.server.storage.SlabAllocator;
import java.util.SplittableRandom;
import java.util.concurrent.TimeUnit;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Measurement;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.Warmup;

/**
 * (a) One allocation and one free in a pool in steady state: 16 regions of 384 MiB (a 6 GiB pool
 * at the server's default pool/16), one size class of 32 MiB (a Llama-8B chunk object), kept 75%
 * full. Each call allocates a new object and frees a random live one, so the pool stays at the same
 * occupancy while the free stacks, bump pointers and partial-region lists of different regions are
 * all exercised. The allocator only does bookkeeping: no pool memory is behind these offsets.
 */
@State(Scope.Thread)
@BenchmarkMode(Mode.SampleTime)
@OutputTimeUnit(TimeUnit.NANOSECONDS)
@Warmup(iterations = 3, time = 1)
@Measurement(iterations = 5, time = 1)
@Fork(value = 1, jvmArgs = {"-Xms512m", "-Xmx512m"})
public class SlabAllocatorBench {
    static final long REGION_BYTES = 384L << 20;
    static final int REGIONS = 16;
    static final long OBJECT_BYTES = 32L << 20;

    private SlabAllocator allocator;
    private long[] live;
    /** Which live object each call frees: drawn in advance so the random generator is not measured. */
    private int[] victims;
    private int call;

    @Setup
    public void setUp() {
        allocator = new SlabAllocator(REGIONS * REGION_BYTES, REGION_BYTES);
        for (int region = 0; region < REGIONS; region++) {
            allocator.addReadyRegion(region);
        }
        int capacity = (int) (REGION_BYTES / OBJECT_BYTES) * REGIONS;
        live = new long[capacity * 3 / 4];
        for (int i = 0; i < live.length; i++) {
            live[i] = allocator.allocate(OBJECT_BYTES);
        }
        SplittableRandom random = new SplittableRandom(7);
        victims = new int[1 << 16];
        for (int i = 0; i < victims.length; i++) {
            victims[i] = random.nextInt(live.length);
        }
    }

    @Benchmark
    public long allocateAndFree() {
        int victim = victims[call++ & (victims.length - 1)];
        long offset = allocator.allocate(OBJECT_BYTES);
        if (offset < 0) {
            throw new IllegalStateException("a 75% full pool refused an allocation");
        }
        allocator.free(live[victim]);
        live[victim] = offset;
        return offset;
    }
}
