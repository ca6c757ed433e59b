package io.lmcache.server.transfer;

import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * CPU workers' shared-memory mappings: one per distinct segment (its device and inode), however
 * many wrappers, names, registrations and instances use it, held by a count of users and unmapped
 * when the last lets go; and their budget. Each mapping costs the process one of the kernel's
 * {@code vm.max_map_count} areas, past which an mmap anywhere in the JVM fails and it aborts, so
 * distinct segments and their bytes are capped server-wide (well under that limit) and per REGISTER
 * (a quarter of the server's, so one registration cannot take it all). A lock of its own, a leaf:
 * held by REGISTERs (transfer lanes) and the release thread, never by a transfer.
 */
public final class SegmentMappings {

    /**
     * The budget: {@code maxSegments} distinct segments and {@code maxBytes} mapped bytes server-wide, a quarter of each per
     * REGISTER; {@code maxMapCount} is the kernel's limit they were chosen under (shown in /status).
     */
    public record Caps(int maxSegments, long maxBytes, long maxMapCount) {
        public int maxSegmentsPerRegister() {
            return Math.max(1, maxSegments / 4);
        }

        public long maxBytesPerRegister() {
            return Math.max(1, maxBytes / 4);
        }
    }

    /** Maps the first {@code nbytes} of the segment being acquired into {@code arena}. */
    @FunctionalInterface
    interface Mapper {
        MemorySegment map(long nbytes, Arena arena) throws IOException;
    }

    /** A REGISTER that would take the server past its budget: {@code reason} is the counter's label. */
    static final class OverBudget extends Exception {
        private static final long serialVersionUID = 1L;
        final String reason;

        OverBudget(String reason, String why) {
            super(why, null, false, false);
            this.reason = reason;
        }
    }

    /** One mapping of a segment's first {@code nbytes}; its memory stays valid until the last user releases it. */
    static final class Mapping {
        final Object fileKey;
        final long nbytes;
        final MemorySegment memory;
        private final Arena arena;
        /** Guarded by the registry's lock. */
        private int users = 1;

        private Mapping(Object fileKey, long nbytes, MemorySegment memory, Arena arena) {
            this.fileKey = fileKey;
            this.nbytes = nbytes;
            this.memory = memory;
            this.arena = arena;
        }
    }

    private final Caps caps;
    /** Per file, its longest live mapping (a shorter one, made before the file grew, lives on for its users). */
    private final Map<Object, Mapping> byFile = new HashMap<>();
    private int segments;
    private long bytes;

    public SegmentMappings(Caps caps) {
        this.caps = caps;
    }

    public Caps caps() {
        return caps;
    }

    /**
     * The mapping of the file {@code fileKey} names, at least {@code nbytes} long: shared when one exists, else made by
     * {@code mapper} when the server's budget has room (nothing changes when it has none, or when the mapper fails).
     */
    synchronized Mapping acquire(Object fileKey, long nbytes, Mapper mapper) throws IOException, OverBudget {
        Mapping existing = byFile.get(fileKey);
        if (existing != null && existing.nbytes >= nbytes) {
            existing.users++;
            return existing;
        }
        if (segments + 1 > caps.maxSegments()) {
            throw new OverBudget("server_segment_cap", "would be distinct segment " + (segments + 1) + " mapped by this server, over its cap"
                    + " of " + caps.maxSegments() + " (--shm-max-segments)");
        }
        if (nbytes > caps.maxBytes() - bytes) {
            throw new OverBudget("server_byte_cap", "would take the bytes this server maps to " + ((bytes + nbytes) >> 20) + " MiB, over its"
                    + " cap of " + (caps.maxBytes() >> 20) + " MiB (--shm-max-mapped-gb)");
        }
        Arena arena = Arena.ofShared();
        MemorySegment memory;
        try {
            memory = mapper.map(nbytes, arena);
        } catch (IOException | RuntimeException e) {
            arena.close();
            throw e;
        }
        Mapping mapping = new Mapping(fileKey, nbytes, memory, arena);
        byFile.put(fileKey, mapping);
        segments++;
        bytes += nbytes;
        return mapping;
    }

    /** One user lets go; the last unmaps (on the release thread, or inline for a refused REGISTER that no transfer saw). */
    void release(Mapping mapping) {
        synchronized (this) {
            if (--mapping.users > 0) {
                return;
            }
            byFile.remove(mapping.fileKey, mapping);
            segments--;
            bytes -= mapping.nbytes;
        }
        // outside the lock: closing a shared arena waits for every thread to leave its accesses
        mapping.arena.close();
    }

    /** Mapped now, and the caps, for /status. */
    public synchronized Map<String, Object> status() {
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("segments", segments);
        out.put("mapped_bytes", bytes);
        out.put("max_segments", caps.maxSegments());
        out.put("max_mapped_bytes", caps.maxBytes());
        out.put("max_segments_per_register", caps.maxSegmentsPerRegister());
        out.put("max_mapped_bytes_per_register", caps.maxBytesPerRegister());
        out.put("vm_max_map_count", caps.maxMapCount());
        return out;
    }

    /** Distinct segments mapped now (tests). */
    synchronized int segments() {
        return segments;
    }
}
