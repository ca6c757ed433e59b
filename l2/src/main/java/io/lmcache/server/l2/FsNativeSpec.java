package io.lmcache.server.l2;

import java.util.List;

/**
 * {@code fs_native}: one file per key under {@code basePath}.
 *
 * @param numWorkers threads that write (write-through)
 * @param readWorkers threads that look up and load ({@code read_io_depth}; {@code num_workers} when it is 0), apart from the
 *     writers so a LOOKUP never queues behind the write-through backlog
 */
public record FsNativeSpec(String basePath, int numWorkers, int readWorkers, String relativeTmpDir, boolean useOdirect, long maxCapacityBytes,
        boolean persistEnabled, EvictionSpec eviction, List<String> warnings) implements L2AdapterSpec {
    public FsNativeSpec {
        warnings = List.copyOf(warnings);
    }

    @Override
    public String type() {
        return FsNativeType.NAME;
    }
}
