package io.lmcache.server.storage;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * Whether the kernel backs the pool with huge pages when the preparation asks ({@code MADV_HUGEPAGE}), which decides
 * how many threads pay off: with 2 MiB pages populating a 64 GiB /dev/shm pool ran at 21 GiB/s on 8 threads and 24 on
 * 16 (H200 host, memory already backed by the VM), with 4 KiB pages at 4.7 and 4.3 (the kernel's per-page work on one
 * shmem file stops scaling at 8). A /dev/shm pool gets them when the tmpfs is mounted with {@code huge=} other than
 * {@code never}/{@code deny} (or shmem huge pages are forced); anonymous memory when transparent huge pages are
 * {@code always} or {@code madvise}. Read once at startup; anything unreadable counts as no.
 */
record HugePages(boolean shm, boolean anonymous) {
    private static final Pattern SELECTED = Pattern.compile("\\[(\\w[\\w+]*)]");
    private static final Pattern HUGE_OPTION = Pattern.compile("(?:^|,)huge=(\\w+)(?:,|$)");

    /** This host's answer. */
    static HugePages probe() {
        String mounts = read(Path.of("/proc/self/mounts"));
        String thp = read(Path.of("/sys/kernel/mm/transparent_hugepage/enabled"));
        String shmem = read(Path.of("/sys/kernel/mm/transparent_hugepage/shmem_enabled"));
        return new HugePages(shmHuge(mounts, shmem), anonymousHuge(thp));
    }

    /** Huge pages for a pool of this kind (a /dev/shm segment, or anonymous memory). */
    boolean forPool(boolean shared) {
        return shared ? shm : anonymous;
    }

    /**
     * @param mounts       /proc/self/mounts
     * @param shmemEnabled /sys/kernel/mm/transparent_hugepage/shmem_enabled ({@code force} gives every tmpfs huge
     *                     pages, {@code deny} none, whatever its mount says)
     */
    static boolean shmHuge(String mounts, String shmemEnabled) {
        String global = selected(shmemEnabled);
        if (global.equals("force") || global.equals("deny")) {
            return global.equals("force");
        }
        boolean huge = false;
        for (String line : mounts.split("\n")) {
            String[] fields = line.trim().split("\\s+");
            // mounts stack (containers often mount a tmpfs over the host's /dev/shm): the last one listed is in effect
            if (fields.length >= 4 && fields[1].equals(L1Pool.SHM_DIR.toString())) {
                Matcher option = HUGE_OPTION.matcher(fields[3]);
                huge = fields[2].equals("tmpfs") && option.find() && !option.group(1).equals("never") && !option.group(1).equals("deny");
            }
        }
        return huge;
    }

    /** @param thpEnabled /sys/kernel/mm/transparent_hugepage/enabled */
    static boolean anonymousHuge(String thpEnabled) {
        String mode = selected(thpEnabled);
        return mode.equals("always") || mode.equals("madvise");
    }

    /** The bracketed choice of a sysfs setting ({@code always [madvise] never} → {@code madvise}), or "". */
    private static String selected(String setting) {
        Matcher m = SELECTED.matcher(setting);
        return m.find() ? m.group(1) : "";
    }

    private static String read(Path path) {
        try {
            return Files.readString(path);
        } catch (IOException | SecurityException e) {
            return "";
        }
    }
}
