package io.lmcache.server.l2;

import static io.lmcache.server.l2.SpecFields.bool;
import static io.lmcache.server.l2.SpecFields.integer;
import static io.lmcache.server.l2.SpecFields.number;
import static io.lmcache.server.l2.SpecFields.text;
import static io.lmcache.server.l2.SpecFields.unknownKeys;

import com.fasterxml.jackson.databind.JsonNode;
import java.io.IOException;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ThreadFactory;

/** The {@code fs_native} type (hybrid-and-l2.md §B.6): its JSON object and its I/O, {@link FsNativeIo}. */
public final class FsNativeType implements L2AdapterType {
    static final String NAME = "fs_native";
    private static final long GIB = 1L << 30;
    private static final Set<String> KEYS = Set.of("base_path", "num_workers", "relative_tmp_dir", "use_odirect", "read_ahead_size",
            "max_capacity_gb", "disk_high_watermark", "disk_min_free_gb", "read_io_depth", "read_max_bytes_in_flight", "shard_directories");
    /** Accepted for compatibility, with a warning that they do nothing here. */
    private static final Set<String> IGNORED = Set.of("read_ahead_size", "disk_high_watermark", "disk_min_free_gb",
            "read_max_bytes_in_flight");

    @Override
    public String name() {
        return NAME;
    }

    @Override
    public FsNativeSpec parse(JsonNode node, Map<String, String> env) throws L2SpecException {
        unknownKeys(node, "fs_native", SpecFields.GENERIC, KEYS);
        SpecFields.noSerde(node);
        if (node.has("shard_directories") && node.get("shard_directories").asBoolean(false)) {
            throw new L2SpecException("fs_native: \"shard_directories\" is not supported by this server");
        }
        JsonNode base = node.get("base_path");
        if (base == null || !base.isTextual() || base.asText().isBlank()) {
            throw new L2SpecException("fs_native: \"base_path\" is required (a directory, created if missing)");
        }
        if (base.asText().indexOf('\0') >= 0) {
            throw new L2SpecException("fs_native: \"base_path\" contains a NUL character");
        }
        int workers = (int) integer(node, "num_workers", 4, 1, 256);
        int readWorkers = (int) integer(node, "read_io_depth", 0, 0, 256);
        String tmpDir = text(node, "relative_tmp_dir", "");
        if (tmpDir.startsWith("/") || List.of(tmpDir.split("/")).contains("..") || tmpDir.indexOf('\0') >= 0) {
            throw new L2SpecException("fs_native: \"relative_tmp_dir\" must be a relative path inside base_path, got '" + L2SpecException.clip(tmpDir) + "'");
        }
        boolean odirect = bool(node, "use_odirect", false);
        double capacityGb = number(node, "max_capacity_gb", 0, 0, 1 << 30);
        boolean persist = bool(node, "persist_enabled", true);
        L2AdapterSpec.EvictionSpec eviction = SpecFields.eviction(node.get("eviction"));
        return new FsNativeSpec(base.asText(), workers, readWorkers == 0 ? workers : readWorkers, tmpDir, odirect, (long) (capacityGb * GIB),
                persist, eviction, warnings(node, capacityGb, eviction));
    }

    private static List<String> warnings(JsonNode node, double capacityGb, L2AdapterSpec.EvictionSpec eviction) {
        List<String> warnings = new ArrayList<>();
        for (String ignored : IGNORED) {
            if (node.has(ignored)) {
                warnings.add("fs_native: \"" + ignored + "\" is accepted but has no effect in this server");
            }
        }
        if (capacityGb > 0 && eviction == null) {
            warnings.add("fs_native: max_capacity_gb without an \"eviction\" block only counts bytes; nothing bounds the disk use");
        }
        if (eviction != null && eviction.lru() && capacityGb == 0) {
            warnings.add("fs_native: an \"eviction\" block needs max_capacity_gb > 0 to evict anything");
        }
        return warnings;
    }

    @Override
    public AdapterIo open(L2AdapterSpec spec, ThreadFactory threads, AdapterLedger ledger) throws IOException {
        return new FsNativeIo((FsNativeSpec) spec, threads, ledger);
    }
}
