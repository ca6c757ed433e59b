package io.lmcache.server.config;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** MemTotal and the cgroup limits, read from fake /proc and /sys/fs/cgroup trees. */
class MemoryLimitsTest {
    private static final long GIB = 1L << 30;

    @TempDir
    Path root;

    private Path write(String relative, String content) throws IOException {
        Path file = root.resolve(relative);
        Files.createDirectories(file.getParent());
        Files.writeString(file, content);
        return file;
    }

    private MemoryLimits probe() {
        return MemoryLimits.probe(root.resolve("proc"), root.resolve("cgroup"));
    }

    @Test
    void memTotalAloneWhenNoCgroupLimits() throws IOException {
        write("proc/meminfo", "MemTotal:       24684084 kB\nMemFree:        20800880 kB\n");
        write("proc/self/cgroup", "0::/\n");
        write("cgroup/cgroup.controllers", "cpu memory\n");
        write("cgroup/memory.max", "max\n");
        MemoryLimits limits = probe();
        assertEquals(24684084L * 1024, limits.limitBytes());
        assertEquals(MemoryLimits.UNKNOWN, limits.cgroupLimitBytes());
        assertTrue(limits.describeLimit().startsWith("MemTotal"));
        // 5% of 23.5 GiB is 1.18 GiB, more than the 1 GiB floor
        assertEquals(24684084L * 1024 - 24684084L * 1024 / 20, limits.poolCeilingBytes());
    }

    @Test
    void cgroupV2TakesTheTightestLimitOnThePathToTheRoot() throws IOException {
        write("proc/meminfo", "MemTotal: 131072000 kB\n");
        write("proc/self/cgroup", "0::/kubepods/pod1/sidecar\n");
        write("cgroup/cgroup.controllers", "cpu memory\n");
        write("cgroup/kubepods/memory.max", "max\n");
        Path pod = write("cgroup/kubepods/pod1/memory.max", Long.toString(8 * GIB) + "\n");
        write("cgroup/kubepods/pod1/sidecar/memory.max", Long.toString(16 * GIB) + "\n");
        MemoryLimits limits = probe();
        assertEquals(8 * GIB, limits.limitBytes());
        assertEquals("the cgroup memory limit (" + pod + ")", limits.describeLimit());
        assertEquals(7 * GIB, limits.poolCeilingBytes(), "1 GiB is more than 5% of 8 GiB");
    }

    @Test
    void cgroupV2InANamespaceReadsTheMountRoot() throws IOException {
        write("proc/meminfo", "MemTotal: 131072000 kB\n");
        write("proc/self/cgroup", "0::/\n");
        write("cgroup/cgroup.controllers", "memory\n");
        write("cgroup/memory.max", Long.toString(4 * GIB));
        assertEquals(4 * GIB, probe().limitBytes());
    }

    @Test
    void cgroupV1ReadsTheLimitAndTheHierarchicalOne() throws IOException {
        write("proc/meminfo", "MemTotal: 131072000 kB\n");
        write("proc/self/cgroup", "4:memory:/docker/abc\n3:cpu,cpuacct:/docker/abc\n0::/\n");
        write("cgroup/memory/docker/abc/memory.limit_in_bytes", "9223372036854771712\n");
        write("cgroup/memory/docker/abc/memory.stat", "cache 0\nhierarchical_memory_limit " + 12 * GIB + "\n");
        assertEquals(12 * GIB, probe().limitBytes());
    }

    @Test
    void cgroupV1UnlimitedAndAPathOutsideTheNamespaceMeanNoLimit() throws IOException {
        // as on this CI machine: the own cgroup's path is not under the mount, whose root is unlimited
        write("proc/meminfo", "MemTotal: 24684084 kB\n");
        write("proc/self/cgroup", "4:memory:/process_api/28c2\n0::/\n");
        write("cgroup/memory/memory.limit_in_bytes", "9223372036854771712\n");
        write("cgroup/memory/memory.stat", "hierarchical_memory_limit 9223372036854771712\n");
        MemoryLimits limits = probe();
        assertEquals(MemoryLimits.UNKNOWN, limits.cgroupLimitBytes());
        assertEquals(24684084L * 1024, limits.limitBytes());
    }

    @Test
    void nothingReadableMeansNoCeiling() {
        MemoryLimits limits = probe();
        assertEquals(MemoryLimits.UNKNOWN, limits.limitBytes());
        assertEquals(MemoryLimits.UNKNOWN, limits.poolCeilingBytes());
    }
}
