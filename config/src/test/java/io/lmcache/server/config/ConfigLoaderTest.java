package io.lmcache.server.config;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

class ConfigLoaderTest {

    private static ServerConfig run(Map<String, String> env, String... args) {
        // the machine's memory is no part of these rules: the memory check has tests of its own below
        ConfigLoader.Outcome outcome = ConfigLoader.load(args, env, MemoryLimits.unlimited());
        return assertInstanceOf(ConfigLoader.Outcome.Run.class, outcome, () -> outcome.toString()).config();
    }

    private static ServerConfig run(String... args) {
        return run(Map.of(), args);
    }

    @Test
    void theTenantBoundaryFlags() {
        TenantSettings defaults = run("--l1-size-gb", "1").tenants();
        assertEquals(TenantSettings.DEFAULTS, defaults, "half the pool, salts digested");
        TenantSettings set = run("--l1-size-gb", "1", "--tenant-read-lock-share", "1", "--metrics-clear-salt-labels").tenants();
        assertEquals(new TenantSettings(1.0, true), set);
        assertEquals(true, run("--l1-size-gb", "1", "--metrics-clear-salt-labels").describe().get("metrics_clear_salt_labels"));
    }

    @Test
    void theWarmupsLanesSpinBrieflyAndOnlyWhereTheServersDo() {
        String previous = System.getProperty("lmcache.transfer.spinUs");
        try {
            System.setProperty("lmcache.transfer.spinUs", "5000");
            ServerConfig spinning = run("--l1-size-gb", "1");
            assertEquals(TimeUnit.MILLISECONDS.toNanos(5), spinning.tuning().transferSpinNs());
            assertEquals(ServerConfig.WARMUP_SPIN_NS, spinning.forWarmup(16).tuning().transferSpinNs(), "short: found both spinning and parked");
            System.setProperty("lmcache.transfer.spinUs", "20");
            assertEquals(TimeUnit.MICROSECONDS.toNanos(20), run("--l1-size-gb", "1").forWarmup(16).tuning().transferSpinNs(), "never longer");
            System.setProperty("lmcache.transfer.spinUs", "0");
            assertEquals(0, run("--l1-size-gb", "1").forWarmup(16).tuning().transferSpinNs(), "no spin where the server's lanes do not");
        } finally {
            if (previous == null) {
                System.clearProperty("lmcache.transfer.spinUs");
            } else {
                System.setProperty("lmcache.transfer.spinUs", previous);
            }
        }
    }

    @Test
    void layerwiseBatchIsLmcachesLayerwiseMode() {
        assertEquals(0, run("--l1-size-gb", "1").layerwiseBatch(), "off by default, as LMCache's");
        assertEquals(4, run("--l1-size-gb", "1", "--layerwise-batch", "4").layerwiseBatch());
        assertEquals(4, run("--l1-size-gb", "1", "--layerwise-batch", "4").describe().get("layerwise_batch"));
        for (String bad : new String[] {"-1", "257", "x"}) {
            ConfigLoader.Outcome.Exit exit = exit("--l1-size-gb", "1", "--layerwise-batch", bad);
            assertEquals(2, exit.code());
            assertTrue(exit.text().contains("--layerwise-batch"), exit.text());
        }
    }

    private static ConfigLoader.Outcome.Exit exit(String... args) {
        ConfigLoader.Outcome outcome = ConfigLoader.load(args, Map.of(), MemoryLimits.unlimited());
        return assertInstanceOf(ConfigLoader.Outcome.Exit.class, outcome, () -> outcome.toString());
    }

    @Test
    void lmcacheDefaults() {
        ServerConfig c = run("--l1-size-gb", "2");
        assertEquals("localhost", c.host());
        assertEquals(5555, c.port());
        assertEquals(256, c.chunkSize());
        assertEquals(1, c.maxWorkers());
        assertEquals(0, c.maxGpuWorkers(), "the transfer lanes are chosen at start");
        assertEquals(1, c.transferLanes(true, 64).count(), "LMCache's one where a GPU serves");
        assertEquals(1, c.maxCpuWorkers());
        assertEquals(EvictionPolicyName.LRU, c.evictionPolicy());
        assertEquals(0.8, c.evictionTriggerWatermark());
        assertEquals(0.2, c.evictionRatio());
        assertEquals(TimeUnit.SECONDS.toNanos(120), c.workerReapTimeoutNs());
        assertEquals(TimeUnit.SECONDS.toNanos(3600), c.workerRegistrationGraceNs());
        assertEquals(TimeUnit.SECONDS.toNanos(60), c.workerDisconnectGraceNs());
        assertEquals(8080, c.httpPort());
        assertEquals(TransferMode.AUTO, c.supportedTransferMode());
        assertEquals(2L << 30, c.l1SizeBytes());
        assertEquals(128L << 20, c.l1RegionSizeBytes(), "2 GiB / 16");
        assertEquals(TimeUnit.SECONDS.toNanos(600), c.l1WriteTtlNs());
        assertEquals(TimeUnit.SECONDS.toNanos(300), c.l1ReadTtlNs());
        assertTrue(c.shmName().startsWith("lmcache_l1_pool_"), c.shmName());
        assertEquals("tcp://localhost:5555", c.zmqEndpoint());
    }

    /** Issue 45 N13: {@code --chunk-size 8192} failed start-up with "Java heap space" (the KV-event log keeps a chunk of token ids a record). */
    @Test
    void theKvEventLogFitsItsTokenBudgetWhateverTheChunkSize() {
        assertEquals(32768, run("--l1-size-gb", "2").kvEventLogSize());
        assertEquals(2048, run("--l1-size-gb", "2", "--chunk-size", "8192").kvEventLogSize(), "16 Mi token ids / 8192");
        assertEquals(16, run("--l1-size-gb", "2", "--chunk-size", Integer.toString(1 << 20)).kvEventLogSize());
        assertEquals(1000, run("--l1-size-gb", "2", "--chunk-size", "8192", "--kv-event-log-size", "1000").kvEventLogSize());
        assertEquals(0, run("--l1-size-gb", "2", "--chunk-size", "8192", "--kv-event-log-size", "0").kvEventLogSize());
        ConfigLoader.Outcome.Exit refused = exit("--l1-size-gb", "2", "--chunk-size", "8192", "--kv-event-log-size", "32768");
        assertEquals(2, refused.code());
        assertTrue(refused.text().contains("--kv-event-log-size") && refused.text().contains("at most 2048"), refused.text());
        assertEquals(1, refused.text().strip().lines().count(), "one line: " + refused.text());
    }

    @Test
    void connectionCapAndStallTimeoutHaveDefaultsAndBounds() {
        ServerConfig c = run("--l1-size-gb", "1");
        assertEquals(ConnectionSettings.defaultCap(ConnectionSettings.readOpenFileLimit()), c.connections().maxConnections());
        assertEquals(30.0, c.describe().get("connection_stall_timeout_seconds"));
        ServerConfig set = run("--l1-size-gb", "1", "--max-connections", "32", "--connection-stall-timeout-seconds", "3");
        assertEquals(32, set.describe().get("max_connections"));
        assertEquals(3_000_000_000L, set.connections().stallTimeoutNs());
        for (String[] bad : new String[][] {{"--max-connections", "0"}, {"--max-connections", "many"}, {"--connection-stall-timeout-seconds", "0"},
            {"--connection-stall-timeout-seconds", "3601"}}) {
            ConfigLoader.Outcome.Exit exit = exit("--l1-size-gb", "1", bad[0], bad[1]);
            assertEquals(2, exit.code());
            assertTrue(exit.text().contains(bad[0] + ": must be"), exit.text());
        }
    }

    @Test
    void maxMessageSizeDefaultsTo16MibAndIsBounded() {
        assertEquals(16L << 20, run("--l1-size-gb", "1").maxMessageBytes());
        assertEquals(64L << 20, run("--l1-size-gb", "1", "--max-message-mb", "64").maxMessageBytes());
        for (String bad : new String[] {"0", "1025", "-1", "1.5", "lots"}) {
            ConfigLoader.Outcome.Exit exit = exit("--l1-size-gb", "1", "--max-message-mb", bad);
            assertEquals(2, exit.code());
            assertTrue(exit.text().contains("--max-message-mb: must be"), exit.text());
        }
    }

    @Test
    void withoutAGpuTheDefaultLanesAreOnePerFourCoresUpToEightAndAGivenFlagWins() {
        ServerConfig c = run("--l1-size-gb", "1");
        assertEquals(1, c.transferLanes(false, 2).count(), "a small host: one");
        assertEquals(4, c.transferLanes(false, 16).count());
        assertEquals(8, c.transferLanes(false, 128).count(), "at most eight");
        assertEquals("auto", c.describe().get("max_gpu_workers"));
        assertEquals(1, run("--l1-size-gb", "1", "--max-workers", "1").transferLanes(false, 16).count(), "--max-workers given: as LMCache");
        assertEquals(2, run("--l1-size-gb", "1", "--max-gpu-workers", "2").transferLanes(false, 16).count());
        assertEquals(3, run("--l1-size-gb", "1", "--max-gpu-workers", "3").transferLanes(true, 16).count());
    }

    @Test
    void workerPoolsInheritMaxWorkers() {
        ServerConfig c = run("--l1-size-gb", "1", "--max-workers", "4", "--max-cpu-workers", "2");
        assertEquals(4, c.maxGpuWorkers());
        assertEquals(2, c.maxCpuWorkers());
    }

    @ParameterizedTest
    @CsvSource(delimiter = '|', value = {
        "--port|70000|--port: must be in 1..65535",
        "--chunk-size|0|--chunk-size: must be in",
        "--eviction-ratio|1.5|--eviction-ratio: must be in (0, 1]",
        "--tenant-read-lock-share|0|--tenant-read-lock-share: must be in (0, 1]",
        "--tenant-read-lock-share|1.5|--tenant-read-lock-share: must be in (0, 1]",
        "--eviction-trigger-watermark|0|--eviction-trigger-watermark: must be in (0, 1]",
        "--eviction-policy|FIFO|--eviction-policy: must be one of LRU, ARC, S3FIFO, IsolatedLRU, noop",
        "--supported-transfer-mode|magic|--supported-transfer-mode: must be one of auto, lmcache_driven, engine_driven",
        "--worker-reap-timeout-seconds|10|--worker-reap-timeout-seconds: must be 0 (disabled) or at least 30",
        "--worker-reap-timeout-seconds|NaN|--worker-reap-timeout-seconds: must be a finite number",
        "--worker-registration-grace-seconds|60|--worker-registration-grace-seconds: must be at least --worker-reap-timeout-seconds",
        "--worker-disconnect-grace-seconds|10|--worker-disconnect-grace-seconds: must be 0 (disabled) or between 30",
        "--worker-disconnect-grace-seconds|200|--worker-disconnect-grace-seconds: must be 0 (disabled) or between 30",
        "--l1-region-size-mb|3|--l1-region-size-mb: must be a multiple of 2",
        "--shm-name|a/b|--shm-name: must be letters",
        "--max-workers|abc|--max-workers: must be an integer",
        "--http-port|5555|--http-port: must differ from --port",
    })
    void badValuesExitTwoWithOneLineNamingTheFlag(String flag, String value, String expected) {
        ConfigLoader.Outcome.Exit exit = exit("--l1-size-gb", "1", flag, value);
        assertEquals(2, exit.code());
        assertTrue(exit.text().startsWith("lmcache-server: error: " + expected), exit.text());
        assertEquals(1, exit.text().strip().lines().count(), "one line: " + exit.text());
    }

    @Test
    void l1SizeIsRequired() {
        ConfigLoader.Outcome.Exit exit = exit();
        assertEquals(2, exit.code());
        assertTrue(exit.text().contains("--l1-size-gb: is required"), exit.text());
    }

    @Test
    void unknownFlagExitsTwo() {
        ConfigLoader.Outcome.Exit exit = exit("--l1-size-gb", "1", "--no-such-flag");
        assertEquals(2, exit.code());
        assertTrue(exit.text().contains("--no-such-flag"), exit.text());
        assertEquals(1, exit.text().strip().lines().count());
    }

    @Test
    void helpListsTheFlagsAndExitsZero() {
        ConfigLoader.Outcome.Exit exit = exit("--help");
        assertEquals(0, exit.code());
        for (String flag : ConfigLoader.flagNames()) {
            assertTrue(exit.text().contains(flag), "help mentions " + flag);
        }
        assertTrue(!exit.text().contains("--test-liveness-floor-seconds"), "the test-only flag stays hidden");
    }

    @Test
    void versionExitsZero() {
        ConfigLoader.Outcome.Exit exit = exit("--version");
        assertEquals(0, exit.code());
        assertTrue(exit.text().startsWith("lmcache-server "), exit.text());
    }

    @Test
    void reapTimeoutZeroDisablesLivenessAndDisconnectReclaim() {
        ServerConfig c = run("--l1-size-gb", "1", "--worker-reap-timeout-seconds", "0");
        assertEquals(0, c.workerReapTimeoutNs());
        assertEquals(0, c.workerDisconnectGraceNs());
    }

    @Test
    void testFloorLowersTheMinimumAndWarnsAboutTheHeartbeat() {
        ConfigLoader.Outcome outcome = ConfigLoader.load(new String[] {"--l1-size-gb", "1", "--test-liveness-floor-seconds", "1",
            "--worker-reap-timeout-seconds", "2", "--worker-registration-grace-seconds", "4", "--worker-disconnect-grace-seconds", "1"}, Map.of());
        ConfigLoader.Outcome.Run run = assertInstanceOf(ConfigLoader.Outcome.Run.class, outcome);
        assertEquals(TimeUnit.SECONDS.toNanos(2), run.config().workerReapTimeoutNs());
        assertTrue(run.warnings().stream().anyMatch(w -> w.contains("3 x the client's 10 s heartbeat")), run.warnings().toString());
    }

    @Test
    void configFileGivesDefaultsAndFlagsWin(@TempDir Path dir) throws IOException {
        Path file = dir.resolve("server.toml");
        Files.writeString(file, "l1_size_gb = 3\nchunk-size = 512\nport = 6000\nunknown_key = 1\n");
        ConfigLoader.Outcome outcome = ConfigLoader.load(new String[] {"--config-file", file.toString(), "--port", "6001"}, Map.of());
        ConfigLoader.Outcome.Run run = assertInstanceOf(ConfigLoader.Outcome.Run.class, outcome);
        assertEquals(3L << 30, run.config().l1SizeBytes());
        assertEquals(512, run.config().chunkSize());
        assertEquals(6001, run.config().port());
        assertTrue(run.warnings().stream().anyMatch(w -> w.contains("unknown_key")));
    }

    @ParameterizedTest
    @CsvSource({"LRU, LRU", "lru, LRU", "ARC, ARC", "S3FIFO, S3FIFO", "s3fifo, S3FIFO", "IsolatedLRU, ISOLATED_LRU", "noop, NOOP"})
    void evictionPoliciesTakeLmcachesNames(String flag, EvictionPolicyName expected) {
        assertEquals(expected, run("--l1-size-gb", "1", "--eviction-policy", flag).evictionPolicy());
    }

    @Test
    void configFileFromTheEnvironment(@TempDir Path dir) throws IOException {
        Path file = dir.resolve("env.toml");
        Files.writeString(file, "l1_size_gb = 1\neviction_policy = \"noop\"\n");
        ServerConfig c = run(Map.of(ConfigLoader.ENV_CONFIG_FILE, file.toString()));
        assertEquals(EvictionPolicyName.NOOP, c.evictionPolicy());
    }

    @Test
    void badConfigFileExitsTwo(@TempDir Path dir) throws IOException {
        Path file = dir.resolve("bad.toml");
        Files.writeString(file, "l1_size_gb = = 3\n");
        ConfigLoader.Outcome.Exit exit = exit("--config-file", file.toString());
        assertEquals(2, exit.code());
        assertTrue(exit.text().contains("--config-file: not valid TOML"), exit.text());
        ConfigLoader.Outcome.Exit missing = exit("--config-file", dir.resolve("nope.toml").toString());
        assertTrue(missing.text().contains("no such file"), missing.text());
    }

    @Test
    void configFileThatIsADirectorySaysSo(@TempDir Path dir) {
        ConfigLoader.Outcome.Exit exit = exit("--config-file", dir.toString());
        assertEquals(2, exit.code());
        assertEquals(1, exit.text().strip().lines().count(), exit.text());
        assertTrue(exit.text().contains("--config-file: is a directory"), exit.text());
    }

    @ParameterizedTest
    @CsvSource({"--host, 999.1.1.1", "--host, 1.2.3.4.5", "--host, '::gg'", "--host, 'bad host'", "--http-host, 256.0.0.1",
        "--http-host, '*'"})
    void invalidHostIsAUsageError(String flag, String host) {
        ConfigLoader.Outcome.Exit exit = exit("--l1-size-gb", "1", flag, host);
        assertEquals(2, exit.code());
        assertEquals(1, exit.text().strip().lines().count(), exit.text());
        assertTrue(exit.text().startsWith("lmcache-server: error: " + flag + ": not a valid"), exit.text());
    }

    @ParameterizedTest
    @CsvSource({"localhost", "127.0.0.1", "0.0.0.0", "'::1'", "'[::1]'", "'*'", "lmcache_server.local", "vllm-0.svc"})
    void validHostsAreTaken(String host) {
        assertEquals(host, run("--l1-size-gb", "1", "--host", host).host());
    }

    @Test
    void adminTokenFromTheEnvironmentIsRedactedInDescribe() {
        ServerConfig c = run(Map.of(ConfigLoader.ENV_ADMIN_TOKEN, "s3cret"), "--l1-size-gb", "1");
        assertEquals("s3cret", c.httpAdminToken());
        assertEquals("<set>", c.describe().get("http_admin_token"));
        assertTrue(!c.describe().toString().contains("s3cret"));
    }

    @Test
    void regionSizeClampsForSmallAndLargePools() {
        assertEquals(64L << 20, run("--l1-size-gb", "0.5").l1RegionSizeBytes());
        assertEquals(1L << 30, run("--l1-size-gb", "200").l1RegionSizeBytes());
        assertEquals(8L << 20, run("--l1-size-gb", "0.0078125").l1RegionSizeBytes(), "a pool smaller than 64 MiB is one region");
    }

    @Test
    void aPoolOverTheMemoryLimitExitsTwoWithOneLineNamingTheLimit() {
        long gib = 1L << 30;
        MemoryLimits cgroup = new MemoryLimits(24 * gib, 16 * gib, "/sys/fs/cgroup/memory.max");
        ConfigLoader.Outcome outcome = ConfigLoader.load(new String[] {"--l1-size-gb", "15.5"}, Map.of(), cgroup);
        ConfigLoader.Outcome.Exit exit = assertInstanceOf(ConfigLoader.Outcome.Exit.class, outcome, () -> outcome.toString());
        assertEquals(2, exit.code());
        assertEquals(1, exit.text().strip().lines().count(), exit.text());
        assertTrue(exit.text().startsWith("lmcache-server: error: --l1-size-gb: 15.5 GiB cannot fit: the cgroup memory limit "
                + "(/sys/fs/cgroup/memory.max) is 16.0 GiB"), exit.text());
        assertTrue(exit.text().contains("at most 15.0 GiB"), "16 GiB less 1 GiB: " + exit.text());
        assertInstanceOf(ConfigLoader.Outcome.Run.class, ConfigLoader.load(new String[] {"--l1-size-gb", "15"}, Map.of(), cgroup));

        MemoryLimits machine = new MemoryLimits(100 * gib, MemoryLimits.UNKNOWN, "");
        ConfigLoader.Outcome big = ConfigLoader.load(new String[] {"--l1-size-gb", "96"}, Map.of(), machine);
        ConfigLoader.Outcome.Exit refused = assertInstanceOf(ConfigLoader.Outcome.Exit.class, big, () -> big.toString());
        assertTrue(refused.text().contains("MemTotal (/proc/meminfo) is 100.0 GiB") && refused.text().contains("at most 95.0 GiB"),
                "5% of 100 GiB is more than 1 GiB: " + refused.text());
        assertInstanceOf(ConfigLoader.Outcome.Run.class, ConfigLoader.load(new String[] {"--l1-size-gb", "95"}, Map.of(), machine));
    }

    @Test
    void shmOwnerRuleIsStrictUnlessAllowed() throws IOException {
        assertTrue(!run("--l1-size-gb", "1").shmAllowAnyOwner());
        assertTrue(run("--l1-size-gb", "1", "--shm-allow-any-owner").shmAllowAnyOwner());
        assertEquals(true, run("--l1-size-gb", "1", "--shm-allow-any-owner").describe().get("shm_allow_any_owner"));
    }

    @Test
    void objectGroupsAreSeparateUnlessTurnedOff(@TempDir Path dir) throws IOException {
        assertTrue(run("--l1-size-gb", "1").separateObjectGroups(), "on by default, as in the newest LMCache");
        assertTrue(run("--l1-size-gb", "1", "--separate-object-groups").separateObjectGroups());
        ServerConfig off = run("--l1-size-gb", "1", "--no-separate-object-groups");
        assertTrue(!off.separateObjectGroups());
        assertEquals(false, off.describe().get("separate_object_groups"));
        ConfigLoader.Outcome.Exit both = exit("--l1-size-gb", "1", "--separate-object-groups", "--no-separate-object-groups");
        assertEquals(2, both.code());
        assertTrue(both.text().contains("--no-separate-object-groups"), both.text());
        Path file = dir.resolve("groups.toml");
        Files.writeString(file, "l1_size_gb = 1\nno_separate_object_groups = true\n");
        assertTrue(!run("--config-file", file.toString()).separateObjectGroups(), "the config file's key turns it off too");
    }
}
