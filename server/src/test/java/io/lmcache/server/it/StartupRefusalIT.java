package io.lmcache.server.it;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.lmcache.server.config.MemoryLimits;
import io.lmcache.server.testing.Http;
import io.lmcache.server.testing.ServerLogOnFailure;
import io.lmcache.server.testing.ServerProcess;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * Start-ups refused because of the host (issue 13, items 6 and 7): a pool larger than memory, and a
 * {@code --shm-name} taken by something that is not a dead server's pool. Both exit 2 with one
 * line, touching nothing; a killed server's marked pool is replaced. A {@code --shm-mode} that gives
 * other users access to the pool (issue 31, item 2) is refused the same way, and so is a
 * {@code --hash-algorithm} that no other server could share (issue 27).
 */
@ExtendWith(ServerLogOnFailure.class)
class StartupRefusalIT {
    private static final long GIB = 1L << 30;

    /** Launches a server expected to refuse its start; waits (bounded) for the exit. */
    private static ServerProcess refusedStart(String... args) throws InterruptedException {
        return refusedStart(Map.of(), Set.of(), args);
    }

    private static ServerProcess refusedStart(Map<String, String> env, Set<String> unset, String... args) throws InterruptedException {
        ServerProcess server = ServerProcess.launch(env, unset, args);
        assertTrue(server.process().waitFor(60, TimeUnit.SECONDS), "the server exits instead of starting");
        server.close();
        return server;
    }

    private static List<String> errorLines(ServerProcess server) {
        return server.log().strip().lines().filter(line -> line.startsWith("lmcache-server: error")).toList();
    }

    @Test
    void aPoolLargerThanMemoryExitsTwoWithOneLineBeforeTouchingMemory() throws Exception {
        MemoryLimits limits = MemoryLimits.probe();
        assumeTrue(limits.limitBytes() != MemoryLimits.UNKNOWN, "no memory limit readable here");
        // 100 GiB on the 24 GiB CI machine; twice the memory wherever there is more
        long sizeGb = Math.max(100, 2 * limits.limitBytes() / GIB);
        ServerProcess server = refusedStart("--l1-size-gb", Long.toString(sizeGb));
        assertEquals(2, server.process().exitValue(), server.log());
        // the log file holds stdout and stderr together: the whole output is the one line
        List<String> lines = server.log().strip().lines().toList();
        assertEquals(1, lines.size(), server.log());
        assertTrue(lines.getFirst().startsWith("lmcache-server: error: --l1-size-gb: " + sizeGb + " GiB cannot fit: "), lines.getFirst());
        assertTrue(lines.getFirst().contains("MemTotal") || lines.getFirst().contains("cgroup"), "names the limit: " + lines.getFirst());
    }

    @Test
    void aBadTuningPropertyExitsTwoWithOneLineNamingIt() throws Exception {
        ServerProcess server = refusedStart(Map.of("JAVA_TOOL_OPTIONS", "-Dlmcache.cuda.stagingMiB=lots"), Set.of());
        assertEquals(2, server.process().exitValue(), server.log());
        // the JVM says it picked up JAVA_TOOL_OPTIONS; the server's own output is the one error line
        assertEquals(List.of("lmcache-server: error: -Dlmcache.cuda.stagingMiB: must be a whole number in [1, 1024], got 'lots' (see --help)"),
                errorLines(server), server.log());
    }

    @Test
    void aPoolModeThatGivesOthersAccessExitsTwoWithOneLineAndCreatesNothing() throws Exception {
        String name = "lmcache_it_mode_" + ProcessHandle.current().pid();
        ServerProcess server = refusedStart("--shm-name", name, "--shm-mode", "0666");
        assertEquals(2, server.process().exitValue(), server.log());
        List<String> lines = server.log().strip().lines().toList();
        assertEquals(1, lines.size(), server.log());
        assertTrue(lines.getFirst().startsWith("lmcache-server: error: --shm-mode: must give others no access"), lines.getFirst());
        assertFalse(Files.exists(Path.of("/dev/shm", name), LinkOption.NOFOLLOW_LINKS), "no pool file was created");
    }

    @Test
    void aHashAlgorithmNoOtherServerCouldShareExitsTwoWithOneLine() throws Exception {
        ServerProcess builtin = refusedStart(Map.of("PYTHONHASHSEED", "0"), Set.of(), "--hash-algorithm", "builtin");
        assertEquals(2, builtin.process().exitValue(), builtin.log());
        List<String> lines = builtin.log().strip().lines().toList();
        assertEquals(1, lines.size(), builtin.log());
        assertTrue(lines.getFirst().startsWith("lmcache-server: error: --hash-algorithm: builtin (Python's hash())"), lines.getFirst());

        ServerProcess unknown = refusedStart("--hash-algorithm", "xxhash");
        assertEquals(2, unknown.process().exitValue(), unknown.log());
        assertEquals(List.of("lmcache-server: error: --hash-algorithm: must be blake3 or sha256_cbor, got 'xxhash' (see --help)"),
                unknown.log().strip().lines().toList());
    }

    @Test
    void sha256CborWithoutPythonHashSeedExitsTwoWithOneLineAndStartsWithIt() throws Exception {
        ServerProcess unseeded = refusedStart(Map.of(), Set.of("PYTHONHASHSEED"), "--hash-algorithm", "sha256_cbor");
        assertEquals(2, unseeded.process().exitValue(), unseeded.log());
        List<String> lines = unseeded.log().strip().lines().toList();
        assertEquals(1, lines.size(), unseeded.log());
        assertTrue(lines.getFirst().startsWith("lmcache-server: error: --hash-algorithm: sha256_cbor needs PYTHONHASHSEED set"),
                lines.getFirst());

        try (ServerProcess seeded = ServerProcess.start(Map.of("PYTHONHASHSEED", "0"), "--hash-algorithm", "sha256_cbor")) {
            assertTrue(Http.get(seeded.httpBase() + "/config").body().contains("\"hash_algorithm\":\"sha256_cbor\""), "shown in /config");
            seeded.terminate(Duration.ofSeconds(30));
        }
    }

    @Test
    void anUnrelatedShmFileSurvivesShmName() throws Exception {
        Path foreign = Path.of("/dev/shm", "lmcache_it_foreign_" + ProcessHandle.current().pid());
        byte[] content = "a worker's KV segment, not a pool".getBytes();
        Files.write(foreign, content);
        try {
            Object inode = Files.getAttribute(foreign, "unix:fileKey", LinkOption.NOFOLLOW_LINKS);
            ServerProcess server = refusedStart("--shm-name", foreign.getFileName().toString());
            assertEquals(2, server.process().exitValue(), server.log());
            List<String> errors = errorLines(server);
            assertEquals(1, errors.size(), server.log());
            assertTrue(errors.getFirst().startsWith("lmcache-server: error: --shm-name: /dev/shm/" + foreign.getFileName()
                    + " is taken by something that is not an lmcache pool"), errors.getFirst());
            assertTrue(server.log().lines().noneMatch(line -> line.contains("Exception")), server.log());
            assertEquals(inode, Files.getAttribute(foreign, "unix:fileKey", LinkOption.NOFOLLOW_LINKS), "the same file, not a new one");
            assertArrayEquals(content, Files.readAllBytes(foreign), "and unchanged");
        } finally {
            Files.deleteIfExists(foreign);
        }
    }

    @Test
    void aLivePoolIsRefusedAndAKilledServersPoolIsReplaced() throws Exception {
        String name = "lmcache_it_stale_" + ProcessHandle.current().pid();
        Path pool = Path.of("/dev/shm", name);
        try {
            ServerProcess first = ServerProcess.start("--shm-name", name);
            Object firstInode = Files.getAttribute(pool, "unix:fileKey", LinkOption.NOFOLLOW_LINKS);

            ServerProcess second = refusedStart("--shm-name", name);
            assertEquals(2, second.process().exitValue(), second.log());
            assertEquals(1, errorLines(second).size(), second.log());
            assertTrue(errorLines(second).getFirst().contains("is the L1 pool of another running server"), second.log());
            assertTrue(first.isAlive() && Files.exists(pool), "the running server keeps its pool");

            first.process().destroyForcibly();
            assertTrue(first.process().waitFor(30, TimeUnit.SECONDS));
            first.close();
            assertTrue(Files.exists(pool, LinkOption.NOFOLLOW_LINKS), "SIGKILL leaves the pool behind");

            try (ServerProcess third = ServerProcess.start("--shm-name", name)) {
                assertNotEquals(firstInode, Files.getAttribute(pool, "unix:fileKey", LinkOption.NOFOLLOW_LINKS), "a new pool file");
                assertTrue(Http.get(third.httpBase() + "/status").body().contains(name), "the new server serves from it");
                third.terminate(Duration.ofSeconds(30));
            }
            assertTrue(Files.notExists(pool, LinkOption.NOFOLLOW_LINKS), "a clean shutdown removes the pool");
        } finally {
            Files.deleteIfExists(pool);
        }
    }
}
