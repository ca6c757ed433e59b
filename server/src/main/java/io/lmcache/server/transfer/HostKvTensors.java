package io.lmcache.server.transfer;

import io.lmcache.server.protocol.TensorWrapper;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicBoolean;

/**
 * A CPU worker's KV tensors: POSIX shared-memory segments ({@code /dev/shm/<name>}) mapped at
 * registration, each opened under the rules of {@link ShmSegments} (the name comes from the wire)
 * and once per distinct name, however many wrappers name it; the mapping itself is shared with
 * every other registration of the same file ({@link SegmentMappings}). Over the per-REGISTER budget
 * (distinct names, bytes) nothing is opened at all. The client unlinks its segments when its
 * process exits, so before each transfer {@link #checkAlive()} confirms every segment is still the
 * one we mapped and still long enough (a truncated segment would fault a copy): a dead worker's
 * transfer fails instead of touching memory nobody owns any more.
 */
public final class HostKvTensors implements AutoCloseable {
    private final MemorySegment[] tensors;
    /** One per distinct name, each holding one use of its mapping. */
    private final List<ShmSegments.Segment> segments;
    private final SegmentMappings mappings;
    private final AtomicBoolean released = new AtomicBoolean();

    private HostKvTensors(MemorySegment[] tensors, List<ShmSegments.Segment> segments, SegmentMappings mappings) {
        this.tensors = tensors;
        this.segments = segments;
        this.mappings = mappings;
    }

    /** Maps every tensor's segment; fails, holding nothing, when one is refused, missing or too small, or the budget is exceeded. */
    public static HostKvTensors map(List<TensorWrapper.CpuShm> wrappers, ShmSegments shm) throws LayoutException {
        Map<String, Integer> firstIndex = new LinkedHashMap<>();
        Map<String, Long> longest = new LinkedHashMap<>();
        for (int i = 0; i < wrappers.size(); i++) {
            if (wrappers.get(i).nbytes() < 0) {
                throw new LayoutException("tensor " + i + ": the wrapper says the segment has " + wrappers.get(i).nbytes() + " bytes");
            }
            String name = ShmSegments.localName(wrappers.get(i).shmName());
            firstIndex.putIfAbsent(name, i);
            longest.merge(name, wrappers.get(i).nbytes(), Math::max);
        }
        checkRegisterBudget(longest, shm);
        SegmentMappings mappings = shm.mappings();
        Map<String, ShmSegments.Segment> byName = new LinkedHashMap<>();
        try {
            for (Map.Entry<String, Long> entry : longest.entrySet()) {
                int index = firstIndex.get(entry.getKey());
                byName.put(entry.getKey(), shm.map(index, wrappers.get(index).shmName(), entry.getValue()));
            }
        } catch (LayoutException | RuntimeException e) {
            // nothing half-registered: the uses taken so far go back (unmapped now when this REGISTER was their only user)
            byName.values().forEach(segment -> mappings.release(segment.mapping()));
            throw e;
        }
        MemorySegment[] tensors = new MemorySegment[wrappers.size()];
        for (int i = 0; i < tensors.length; i++) {
            TensorWrapper.CpuShm wrapper = wrappers.get(i);
            tensors[i] = byName.get(ShmSegments.localName(wrapper.shmName())).mapping().memory.asSlice(0, wrapper.nbytes());
        }
        return new HostKvTensors(tensors, new ArrayList<>(byName.values()), mappings);
    }

    /** Refuses, before anything is opened, a REGISTER naming more distinct segments or bytes than one may. */
    private static void checkRegisterBudget(Map<String, Long> longest, ShmSegments shm) throws LayoutException {
        SegmentMappings.Caps caps = shm.mappings().caps();
        if (longest.size() > caps.maxSegmentsPerRegister()) {
            throw shm.overBudget("register_segment_cap", "the registration names " + longest.size() + " distinct shared-memory segments,"
                    + " more than one may (" + caps.maxSegmentsPerRegister() + ", a quarter of --shm-max-segments)");
        }
        long total = 0;
        for (long nbytes : longest.values()) {
            total = nbytes > 0 && total > Long.MAX_VALUE - nbytes ? Long.MAX_VALUE : total + Math.max(0, nbytes);
        }
        if (total > caps.maxBytesPerRegister()) {
            throw shm.overBudget("register_byte_cap", "the registration's shared-memory segments take " + (total >> 20) + " MiB, more than"
                    + " one may map (" + (caps.maxBytesPerRegister() >> 20) + " MiB, a quarter of --shm-max-mapped-gb)");
        }
    }

    public MemorySegment tensor(int index) {
        return tensors[index];
    }

    public int count() {
        return tensors.length;
    }

    /** Null when the mappings still reach the worker's memory, else why not (segment deleted, replaced, truncated). */
    public String checkAlive() {
        for (ShmSegments.Segment segment : segments) {
            String dead = ShmSegments.checkAlive(segment);
            if (dead != null) {
                return dead;
            }
        }
        return null;
    }

    /**
     * Lets go of the mappings (the last user of each unmaps it); called by the release thread after the last transfer using
     * the tensors has finished. Once only, also when the release thread retries.
     */
    @Override
    public void close() {
        if (released.compareAndSet(false, true)) {
            segments.forEach(segment -> mappings.release(segment.mapping()));
        }
    }
}
