package io.lmcache.server.config;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;

/**
 * How much memory this process may use: the machine's {@code MemTotal} and the memory cgroup's
 * limit (v2 {@code memory.max} of this process's cgroup and its ancestors; v1
 * {@code memory.limit_in_bytes} and {@code hierarchical_memory_limit}). Read once at start-up so
 * that a pool that can never fit is refused before any of it is touched, instead of prefaulting
 * until the kernel's OOM killer takes the server (or a neighbour).
 *
 * @param memTotalBytes {@code MemTotal} of /proc/meminfo; {@link #UNKNOWN} when unreadable
 * @param cgroupLimitBytes the tightest cgroup limit; {@link #UNKNOWN} when there is none
 * @param cgroupSource the file the cgroup limit came from, for the error line
 */
public record MemoryLimits(long memTotalBytes, long cgroupLimitBytes, String cgroupSource) {
    public static final long UNKNOWN = Long.MAX_VALUE;
    private static final long GIB = 1L << 30;
    /** v1 reports "no limit" as a huge page-aligned number (0x7FFFFFFFFFFFF000); anything past 2^62 means none. */
    private static final long V1_UNLIMITED = 1L << 62;

    /** No limit known (tests, or a system without /proc). */
    public static MemoryLimits unlimited() {
        return new MemoryLimits(UNKNOWN, UNKNOWN, "");
    }

    /** This process's limits, from /proc and /sys/fs/cgroup. */
    public static MemoryLimits probe() {
        return probe(Path.of("/proc"), Path.of("/sys/fs/cgroup"));
    }

    /** As {@link #probe()}, with the two roots given (tests point them at fake trees). */
    public static MemoryLimits probe(Path procRoot, Path cgroupRoot) {
        long memTotal = memTotal(procRoot.resolve("meminfo"));
        long limit = UNKNOWN;
        String source = "";
        for (String line : lines(procRoot.resolve("self/cgroup"))) {
            String[] parts = line.split(":", 3);
            if (parts.length != 3) {
                continue;
            }
            String relative = parts[2].startsWith("/") ? parts[2].substring(1) : parts[2];
            Limit found = null;
            if (parts[0].equals("0") && parts[1].isEmpty() && Files.exists(cgroupRoot.resolve("cgroup.controllers"))) {
                found = v2Limit(cgroupRoot, relative);
            } else if (List.of(parts[1].split(",")).contains("memory")) {
                found = v1Limit(cgroupRoot.resolve("memory"), relative);
            }
            if (found != null && found.bytes() < limit) {
                limit = found.bytes();
                source = found.source();
            }
        }
        return new MemoryLimits(memTotal, limit, source);
    }

    /**
     * The largest pool that leaves room for everything else: the tighter limit minus a margin of
     * 1 GiB or 5%, whichever is larger. The server's own heap, metaspace, thread stacks, ZeroMQ
     * and direct buffers take a few hundred MiB; the kernel's page tables for the pool take 0.2%
     * of it; the GiB (or 5% on large hosts, where the OS, the page cache that keeps it usable and
     * other processes need proportionally more) is that plus headroom. Still only a ceiling: a
     * pool just under it can starve the rest of the host, but one over it cannot work at all.
     */
    public long poolCeilingBytes() {
        long limit = limitBytes();
        if (limit == UNKNOWN) {
            return UNKNOWN;
        }
        long margin = Math.max(GIB, limit / 20);
        return Math.max(0, limit - margin);
    }

    /** The tighter of MemTotal and the cgroup limit; {@link #UNKNOWN} when neither is known. */
    public long limitBytes() {
        return Math.min(memTotalBytes, cgroupLimitBytes);
    }

    /** Names the limit that binds, for the error line: "the cgroup limit (/sys/fs/cgroup/memory.max)" or "MemTotal". */
    public String describeLimit() {
        return cgroupLimitBytes < memTotalBytes ? "the cgroup memory limit (" + cgroupSource + ")" : "MemTotal (/proc/meminfo)";
    }

    private record Limit(long bytes, String source) {}

    /** The tightest memory.max from the process's cgroup up to the root (a parent's limit binds its children). */
    private static Limit v2Limit(Path root, String relative) {
        Path dir = root.resolve(relative).normalize();
        if (!dir.startsWith(root) || !Files.isDirectory(dir)) {
            // in a cgroup namespace the own cgroup is the mount's root
            dir = root;
        }
        Limit tightest = null;
        for (; dir != null && dir.startsWith(root); dir = dir.getParent()) {
            Path file = dir.resolve("memory.max");
            long bytes = parseLimit(firstLine(file));
            if (bytes != UNKNOWN && (tightest == null || bytes < tightest.bytes())) {
                tightest = new Limit(bytes, file.toString());
            }
        }
        return tightest;
    }

    private static Limit v1Limit(Path base, String relative) {
        Path dir = base.resolve(relative).normalize();
        if (!dir.startsWith(base) || !Files.isDirectory(dir)) {
            dir = base;
        }
        Limit tightest = null;
        Path file = dir.resolve("memory.limit_in_bytes");
        long bytes = parseLimit(firstLine(file));
        if (bytes != UNKNOWN) {
            tightest = new Limit(bytes, file.toString());
        }
        // the limit that really applies, ancestors included
        for (String line : lines(dir.resolve("memory.stat"))) {
            if (line.startsWith("hierarchical_memory_limit ")) {
                long hierarchical = parseLimit(line.substring("hierarchical_memory_limit ".length()));
                if (hierarchical != UNKNOWN && (tightest == null || hierarchical < tightest.bytes())) {
                    tightest = new Limit(hierarchical, dir.resolve("memory.stat") + " hierarchical_memory_limit");
                }
            }
        }
        return tightest;
    }

    private static long parseLimit(String text) {
        if (text == null || text.isBlank() || text.strip().equals("max")) {
            return UNKNOWN;
        }
        try {
            long value = Long.parseLong(text.strip());
            return value <= 0 || value >= V1_UNLIMITED ? UNKNOWN : value;
        } catch (NumberFormatException e) {
            return UNKNOWN;
        }
    }

    private static long memTotal(Path meminfo) {
        for (String line : lines(meminfo)) {
            if (line.startsWith("MemTotal:")) {
                String[] fields = line.substring("MemTotal:".length()).strip().split("\\s+");
                try {
                    long value = Long.parseLong(fields[0]);
                    return fields.length > 1 && fields[1].equalsIgnoreCase("kB") ? value * 1024 : value;
                } catch (NumberFormatException e) {
                    return UNKNOWN;
                }
            }
        }
        return UNKNOWN;
    }

    private static String firstLine(Path file) {
        List<String> lines = lines(file);
        return lines.isEmpty() ? null : lines.getFirst();
    }

    private static List<String> lines(Path file) {
        try {
            return Files.readAllLines(file);
        } catch (IOException | RuntimeException e) {
            return List.of();
        }
    }
}
