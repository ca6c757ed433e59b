package io.lmcache.server.transfer;

import io.lmcache.server.protocol.TensorWrapper;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.List;

/**
 * A CPU worker's KV tensors: POSIX shared-memory segments ({@code /dev/shm/<name>}) mapped once
 * at registration, each opened under the rules of {@link ShmSegments} (the name comes from the
 * wire). The client unlinks its segments when its process exits, so before each transfer
 * {@link #checkAlive()} confirms every segment is still the one we mapped and still long enough
 * (a truncated segment would fault a copy): a dead worker's transfer fails instead of touching
 * memory nobody owns any more.
 */
public final class HostKvTensors implements AutoCloseable {
    private final Arena arena;
    private final ShmSegments.Segment[] tensors;

    private HostKvTensors(Arena arena, ShmSegments.Segment[] tensors) {
        this.arena = arena;
        this.tensors = tensors;
    }

    /** Maps every tensor's segment; fails (mapping nothing) when one is refused, missing or too small. */
    public static HostKvTensors map(List<TensorWrapper.CpuShm> wrappers, ShmSegments segments) throws LayoutException {
        Arena arena = Arena.ofShared();
        ShmSegments.Segment[] mapped = new ShmSegments.Segment[wrappers.size()];
        try {
            for (int i = 0; i < mapped.length; i++) {
                TensorWrapper.CpuShm wrapper = wrappers.get(i);
                mapped[i] = segments.map(i, wrapper.shmName(), wrapper.nbytes(), arena);
            }
        } catch (LayoutException | RuntimeException e) {
            arena.close();
            throw e;
        }
        return new HostKvTensors(arena, mapped);
    }

    public MemorySegment tensor(int index) {
        return tensors[index].memory();
    }

    public int count() {
        return tensors.length;
    }

    /** Null when the mappings still reach the worker's memory, else why not (segment deleted, replaced, truncated). */
    public String checkAlive() {
        for (ShmSegments.Segment tensor : tensors) {
            String dead = ShmSegments.checkAlive(tensor);
            if (dead != null) {
                return dead;
            }
        }
        return null;
    }

    /** Unmaps; called once, by the release thread, after the last transfer using the tensors has finished. */
    @Override
    public void close() {
        arena.close();
    }
}
