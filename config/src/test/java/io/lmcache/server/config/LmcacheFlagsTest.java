package io.lmcache.server.config;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;
import org.junit.jupiter.params.provider.MethodSource;

/** LMCache's flags without a counterpart here: accepted with a warning, or refused as "not supported by lmcache-server". */
class LmcacheFlagsTest {

    private static ConfigLoader.Outcome load(String... args) {
        return ConfigLoader.load(args, Map.of(), MemoryLimits.unlimited());
    }

    private static ConfigLoader.Outcome.Run run(String... args) {
        ConfigLoader.Outcome outcome = load(args);
        return assertInstanceOf(ConfigLoader.Outcome.Run.class, outcome, () -> outcome.toString());
    }

    private static String refused(String... args) {
        ConfigLoader.Outcome outcome = load(args);
        ConfigLoader.Outcome.Exit exit = assertInstanceOf(ConfigLoader.Outcome.Exit.class, outcome, () -> outcome.toString());
        assertEquals(2, exit.code());
        return exit.text().strip();
    }

    /** The flag is one of the table's (a flag this server declares for real follows its own rules instead). */
    private static void assertActive(String flag) {
        assertTrue(LmcacheFlags.active().stream().anyMatch(f -> f.name().equals(flag)), flag + " is in LMCache's flag table");
    }

    @Test
    void theIssuesCommandLineStartsWithOneWarningPerIgnoredFlag() {
        ConfigLoader.Outcome.Run run = run("--l1-size-gb", "1", "--no-l1-use-lazy", "--disable-observability", "--eviction-policy", "LRU");
        assertEquals(EvictionPolicyName.LRU, run.config().evictionPolicy());
        assertEquals(2, run.warnings().size(), run.warnings().toString());
        assertTrue(run.warnings().get(0).startsWith("--no-l1-use-lazy is accepted for compatibility with LMCache and has no effect here"));
        assertTrue(run.warnings().get(1).startsWith("--disable-observability is accepted"));
    }

    @Test
    void harmlessFlagsFromLmcachesOwnHarnessesStart() {
        ConfigLoader.Outcome.Run run = run("--l1-size-gb", "1", "--l1-init-size-gb", "20", "--disable-logging", "--engine-type", "default",
                "--enable-extra-logging", "--eviction-policy", "IsolatedLRU", "--p2p-advertise-url", "", "--runtime-plugin-locations",
                "--l1-align-bytes=4096", "--otlp-endpoint", "http://collector:4317");
        assertEquals(EvictionPolicyName.ISOLATED_LRU, run.config().evictionPolicy(), "IsolatedLRU runs as itself, quotas and all");
        List<String> warned = run.warnings().stream().map(w -> w.split(" ")[0]).toList();
        // in the table's order
        assertEquals(List.of("--l1-init-size-gb", "--l1-align-bytes", "--disable-logging", "--otlp-endpoint", "--enable-extra-logging"),
                warned, "LMCache's off values (--engine-type default, an empty URL or list) say nothing");
    }

    @ParameterizedTest
    @CsvSource(delimiter = '|', value = {
        "--gds-l1-path|/mnt/nvme/l1|GPUDirect Storage",
        "--l1-devdax-path|/dev/dax0.0|Device-DAX",
        "--p2p-advertise-url|10.0.0.1:7000|P2P",
        "--engine-type|blend|CacheBlend",
        "--engine-type|blend_legacy|CacheBlend",
        "--runtime-plugin-locations|/opt/plugins|runtime plugins",
        "--enable|transfer_query|experimental transfer modules",
        "--l1-manager|{}|custom L1 managers",
        "--transport|grpc|the gRPC request transport",
        "--null-block-id|-1|a null block other than vLLM's block 0"})
    void eachUnsupportedFeatureRefusesTheStart(String flag, String value, String feature) {
        assertActive(flag);
        String text = refused("--l1-size-gb", "1", flag, value);
        assertTrue(text.startsWith("lmcache-server: error: " + flag + ": "), text);
        assertTrue(text.contains(feature) && text.contains("is not supported by lmcache-server"), text);
    }

    @Test
    void isolatedIpcIsARealFlagAndContradictingItIsRefused() {
        assertTrue(run("--l1-size-gb", "1", "--isolated-ipc").config().isolatedIpc());
        assertFalse(run("--l1-size-gb", "1", "--no-isolated-ipc").config().isolatedIpc());
        assertFalse(run("--l1-size-gb", "1").config().isolatedIpc(), "off by default, as LMCache's");
        assertTrue(run("--l1-size-gb", "1", "--no-isolated-ipc").warnings().isEmpty(), "a real flag: no compatibility warning");
        String text = refused("--l1-size-gb", "1", "--isolated-ipc", "--no-isolated-ipc");
        assertTrue(text.contains("--no-isolated-ipc: contradicts --isolated-ipc"), text);
    }

    /**
     * Every flag of LMCache's newest {@code lmcache server}, each with a value that leaves its feature as LMCache's default does
     * (a flag without a value: as given). Sources, all in LMCache/LMCache: {@code docs/source/mp/configuration.rst} @0039822b
     * ("every CLI argument accepted by the LMCache multiprocess server"); {@code lmcache/v1/multiprocess/config.py} (search-index
     * file id 61921557576: {@code --enable}, {@code --config-file}, the coordinator group with its hidden pre-v0.5.3 aliases;
     * and @00cf03ed: {@code --p2p-rdma-*}); {@code lmcache/v1/mp_observability/config.py} @ec451313 ({@code --enable-gc-monitor},
     * {@code --gc-monitor-*}, {@code --prometheus-port}, {@code --metrics-sample-rate}); {@code --l2-prefetch-load-timeout} from
     * LMCache's multi-L1 CLI test (file id 71175433403) and its design note (file id 70898490774). {@code lmcache server} composes
     * them in {@code lmcache/cli/commands/server.py} (add_mp_server_args, add_storage_manager_args, add_http_frontend_args,
     * add_observability_args).
     */
    static final List<List<String>> LMCACHE_NEWEST_SERVER_FLAGS = List.of(
            // MP server
            List.of("--transport", "zmq"), List.of("--instance-id", "pod-1"), List.of("--host", "127.0.0.1"), List.of("--port", "5555"),
            List.of("--chunk-size", "256"), List.of("--null-block-id", "0"), List.of("--max-workers", "1"), List.of("--max-gpu-workers", "1"),
            List.of("--max-cpu-workers", "1"), List.of("--grpc-server-workers", "32"), List.of("--hash-algorithm", "blake3"),
            List.of("--engine-type", "default"), List.of("--supported-transfer-mode", "lmcache_driven"), List.of("--no-isolated-ipc"),
            List.of("--runtime-plugin-locations"), List.of("--runtime-plugin-config", "{}"), List.of("--script-allowed-imports", "numpy"),
            List.of("--run-script-api-enabled"), List.of("--shm-name", ""), List.of("--worker-reap-timeout-seconds", "120"),
            List.of("--worker-registration-grace-seconds", "3600"), List.of("--enable-segmented-prefix"), List.of("--enable-dedup-content"),
            List.of("--layerwise-batch", "0"),
            List.of("--separate-object-groups"), List.of("--no-separate-object-groups"), List.of("--enable"),
            // lookup-hash logging
            List.of("--lookup-hash-log-dir", ""), List.of("--lookup-hash-log-rotation-interval", "21600"),
            List.of("--lookup-hash-log-rotation-max-size", "104857600"), List.of("--lookup-hash-log-max-files", "100"),
            // HTTP frontend
            List.of("--http-host", "127.0.0.1"), List.of("--http-port", "8080"),
            // P2P
            List.of("--p2p-advertise-url", ""), List.of("--p2p-listen-url", ""), List.of("--p2p-lookup-timeout", "30"),
            List.of("--p2p-load-timeout", "30"), List.of("--p2p-transfer-engine", "nixl"), List.of("--p2p-rdma-device", ""),
            List.of("--p2p-rdma-port", "1"), List.of("--p2p-rdma-gid-index", "-1"), List.of("--p2p-rdma-gid-indices", ""),
            List.of("--p2p-rdma-queue-depth", "4096"), List.of("--p2p-rdma-handshake-timeout-ms", "10000"),
            // coordinator (the URL unset; the rest then changes nothing)
            List.of("--coordinator-url", ""), List.of("--coordinator-advertise-ip", "10.0.0.7"), List.of("--coordinator-heartbeat-interval", "5"),
            List.of("--coordinator-event-reporting"), List.of("--coordinator-event-flush-interval", "1"),
            List.of("--coordinator-l2-event-reporting"), List.of("--coordinator-l2-event-flush-interval", "1"),
            // L1 memory, GDS, TTLs
            List.of("--l1-size-gb", "1"), List.of("--l1-use-lazy"), List.of("--no-l1-use-lazy"), List.of("--l1-init-size-gb", "20"),
            List.of("--l1-align-bytes", "4096"), List.of("--l1-use-hugepages"), List.of("--no-l1-use-hugepages"),
            List.of("--l1-devdax-path", ""), List.of("--l1-manager", ""), List.of("--gds-l1-path", ""), List.of("--gds-l1-backend", "auto"),
            List.of("--gds-l1-use-direct-io"), List.of("--no-gds-l1-use-direct-io"), List.of("--l1-write-ttl-seconds", "600"),
            List.of("--l1-read-ttl-seconds", "300"),
            // eviction and L2 policies
            List.of("--eviction-policy", "LRU"), List.of("--eviction-trigger-watermark", "0.8"), List.of("--eviction-ratio", "0.2"),
            List.of("--eviction-target-watermark", "0.6"), List.of("--l2-store-policy", "default"), List.of("--l2-prefetch-policy", "default"),
            List.of("--l2-prefetch-max-in-flight", "8"), List.of("--l2-prefetch-load-timeout", "5"),
            List.of("--periodic-notifier-interval-ms", "5"),
            // observability
            List.of("--disable-observability"), List.of("--disable-metrics"), List.of("--disable-grpc-metrics"), List.of("--disable-logging"),
            List.of("--enable-tracing"), List.of("--event-bus-queue-size", "10000"), List.of("--otlp-endpoint", "http://collector:4317"),
            List.of("--prometheus-port", "9090"), List.of("--metrics-sample-rate", "0.01"), List.of("--trace-level", "events"),
            List.of("--trace-output", "/tmp/trace.lct"), List.of("--enable-extra-logging"), List.of("--extra-logging-interval", "10"),
            List.of("--enable-gc-monitor"), List.of("--gc-monitor-min-pause-ms", "1"), List.of("--gc-monitor-top-objects", "0"));

    static List<List<String>> lmcacheNewestServerFlags() {
        return LMCACHE_NEWEST_SERVER_FLAGS;
    }

    @ParameterizedTest
    @MethodSource("lmcacheNewestServerFlags")
    void everyFlagOfLmcachesNewestServerStartsTheConfiguration(List<String> flag) {
        List<String> args = new ArrayList<>(flag.getFirst().equals("--l1-size-gb") ? List.of() : List.of("--l1-size-gb", "1"));
        args.addAll(flag);
        ConfigLoader.Outcome outcome = load(args.toArray(String[]::new));
        assertInstanceOf(ConfigLoader.Outcome.Run.class, outcome, () -> String.join(" ", flag) + ": " + outcome);
    }

    @Test
    void theWholeNewestListTogetherStartsTheConfigurationAndConfigNamesWhatHasNoEffect(@TempDir Path dir) throws IOException {
        Path file = dir.resolve("lmcache.toml");
        Files.writeString(file, "chunk_size = 256\n");
        List<String> args = new ArrayList<>(List.of("--config-file", file.toString()));
        // each --no-x only once its --x is not given too (this server refuses a contradiction)
        LMCACHE_NEWEST_SERVER_FLAGS.stream().filter(flag -> !flag.getFirst().startsWith("--no-")).forEach(args::addAll);
        ConfigLoader.Outcome.Run run = run(args.toArray(String[]::new));
        @SuppressWarnings("unchecked")
        List<String> withoutEffect = (List<String>) run.config().describe().get("lmcache_flags_without_effect");
        assertTrue(withoutEffect.containsAll(List.of("--enable-gc-monitor", "--l1-use-hugepages", "--disable-grpc-metrics",
                "--p2p-rdma-queue-depth", "--run-script-api-enabled")), withoutEffect.toString());
        assertTrue(!withoutEffect.contains("--coordinator-url") && !withoutEffect.contains("--l2-prefetch-load-timeout")
                && !withoutEffect.contains("--chunk-size"), "off values and the server's own flags are not listed: " + withoutEffect);
        assertEquals(withoutEffect.size(), run.warnings().stream().filter(w -> w.contains("is accepted for compatibility")).count(),
                "one warning each: " + run.warnings());
        assertEquals(List.of(), run("--l1-size-gb", "1").config().describe().get("lmcache_flags_without_effect"));
    }

    @Test
    void theL2PrefetchLoadTimeoutBoundsTheWaitForL2AsLmcachesFlagDoes() {
        assertEquals(L2Settings.DEFAULT_PREFETCH_LOAD_TIMEOUT_NS, run("--l1-size-gb", "1").config().l2().prefetchLoadTimeoutNs());
        ServerConfig set = run("--l1-size-gb", "1", "--l2-prefetch-load-timeout", "0.25").config();
        assertEquals(250_000_000L, set.l2().prefetchLoadTimeoutNs());
        assertEquals(0.25, set.describe().get("l2_prefetch_load_timeout"));
        assertTrue(set.describe().get("lmcache_flags_without_effect") instanceof List<?> none && none.isEmpty(), "it has an effect");
        // LMCache refuses what is not a finite positive number (test_multi_l1_cli_rejects_invalid_deadline)
        for (String bad : new String[] {"0", "-1", "nan", "inf", "soon", "86401"}) {
            assertTrue(refused("--l1-size-gb", "1", "--l2-prefetch-load-timeout", bad).contains("--l2-prefetch-load-timeout: must be"), bad);
        }
    }

    /** Flags this server implements itself are its own, never the table's (the table defers to them). */
    @Test
    void flagsTheServerImplementsAreNotInTheTable() {
        for (String implemented : List.of("--l2-adapter", "--l2-store-policy", "--l2-prefetch-policy", "--l2-prefetch-max-in-flight",
                "--separate-object-groups", "--no-separate-object-groups")) {
            assertTrue(LmcacheFlags.active().stream().noneMatch(flag -> flag.name().equals(implemented)), implemented);
        }
        assertTrue(run("--l1-size-gb", "1", "--no-separate-object-groups", "--l2-store-policy", "skip_l1").warnings().isEmpty());
    }

    @Test
    void everyTableFlagParsesAndIsEitherAcceptedOrRefusedByName() {
        for (LmcacheFlags.Flag flag : LmcacheFlags.active()) {
            List<String> args = new ArrayList<>(List.of("--l1-size-gb", "1", flag.name()));
            if (flag.kind() != LmcacheFlags.Kind.FLAG) {
                args.add("x");
            }
            ConfigLoader.Outcome outcome = load(args.toArray(String[]::new));
            switch (outcome) {
                case ConfigLoader.Outcome.Run run -> {
                    assertInstanceOf(LmcacheFlags.Rule.NoEffect.class, flag.rule(), flag.name());
                    assertTrue(run.warnings().stream().anyMatch(w -> w.startsWith(flag.name() + " is accepted")), flag.name());
                }
                case ConfigLoader.Outcome.Exit exit -> {
                    assertInstanceOf(LmcacheFlags.Rule.Unsupported.class, flag.rule(), flag.name() + ": " + exit.text());
                    assertTrue(exit.text().contains(flag.name() + ": ") && exit.text().contains("not supported by lmcache-server"), exit.text());
                }
            }
        }
    }

    @Test
    void aConfigFileFollowsTheSameRulesAndItsArraysOnlyWarn(@TempDir Path dir) throws IOException {
        Path file = dir.resolve("lmcache.toml");
        Files.writeString(file, """
                l1_size_gb = 1
                l1_use_lazy = false
                no_l1_use_lazy = true
                script_allowed_imports = ["numpy"]
                runtime_plugin_locations = []
                max_workers = [1, 2]
                engine_type = "default"
                """);
        ConfigLoader.Outcome.Run run = run("--config-file", file.toString());
        assertEquals(1, run.config().maxWorkers(), "the array was ignored, the default kept");
        List<String> warnings = run.warnings();
        assertEquals(3, warnings.size(), warnings.toString());
        assertTrue(warnings.get(0).contains("no_l1_use_lazy is accepted for compatibility"), warnings.get(0));
        assertTrue(warnings.get(1).contains("script_allowed_imports is accepted"), warnings.get(1));
        assertTrue(warnings.get(2).contains("key 'max_workers' must be a plain value, not a table or array; ignored"), warnings.get(2));

        Files.writeString(file, "l1_size_gb = 1\ngds_l1_path = \"/mnt/nvme\"\n");
        String text = refused("--config-file", file.toString());
        assertTrue(text.contains("gds_l1_path: GPUDirect Storage as L1 memory is not supported by lmcache-server"), text);
        Files.writeString(file, "l1_size_gb = 1\nruntime_plugin_locations = [\"/opt/p\"]\n");
        assertTrue(refused("--config-file", file.toString()).contains("runtime plugins is not supported by lmcache-server"));
    }

    @Test
    void theConfigurationDocListsEveryTableFlagWithItsRule() throws IOException {
        // the flag tables moved from the README to docs/configuration.md, which the README links
        String doc = Files.readString(Path.of(System.getProperty("lmcache.repo.root", "..")).resolve("docs/configuration.md"));
        for (LmcacheFlags.Flag flag : LmcacheFlags.active()) {
            String word = flag.rule() instanceof LmcacheFlags.Rule.NoEffect ? "no effect" : "refused";
            assertTrue(doc.lines().anyMatch(line -> line.startsWith("| `" + flag.name() + "`") && line.contains(word)),
                    "docs/configuration.md has a row for " + flag.name() + " saying " + word);
        }
    }

    @Test
    void operatorFlagsAreValidated() {
        OperatorSettings defaults = run("--l1-size-gb", "1", "--instance-id", "pod-7").config().operator();
        assertEquals(OperatorSettings.DEFAULT_SHM_MODE, defaults.shmMode());
        assertEquals(0.01, defaults.metricsSampleRate());
        assertEquals("pod-7", defaults.serviceInstanceId(), "the label defaults to --instance-id");
        OperatorSettings set = run("--l1-size-gb", "1", "--shm-mode", "0660", "--metrics-sample-rate", "1",
                "--service-instance-id", "node-a").config().operator();
        assertEquals(0660, set.shmMode());
        assertEquals("0660", set.shmModeText());
        assertEquals(1.0, set.metricsSampleRate());
        assertEquals("node-a", set.serviceInstanceId());
        assertEquals(0640, run("--l1-size-gb", "1", "--shm-mode", "640").config().operator().shmMode());
        for (String world : new String[] {"0666", "666", "0604", "0602", "0664"}) {
            assertTrue(refused("--l1-size-gb", "1", "--shm-mode", world).contains("--shm-mode: must give others no access"), world);
        }
        for (String bad : new String[] {"0400", "0770", "0700", "0610", "9", "0x1b0", "rw-rw----", "0755", "0601", "4660", "01660", "", "0o660"}) {
            assertTrue(refused("--l1-size-gb", "1", "--shm-mode", bad).contains("--shm-mode: must"), bad);
        }
        for (String bad : new String[] {"0", "1.5", "-0.1", "NaN", "often"}) {
            assertTrue(refused("--l1-size-gb", "1", "--metrics-sample-rate", bad).contains("--metrics-sample-rate: must"), bad);
        }
        assertEquals("0600", run("--l1-size-gb", "1").config().describe().get("shm_mode"), "owner only unless asked");
    }

    @Test
    void numaPlacementIsAutoUnlessTurnedOff() {
        assertTrue(run("--l1-size-gb", "1").config().operator().numaPlacement());
        assertEquals("auto", run("--l1-size-gb", "1").config().describe().get("numa_placement"));
        assertEquals("off", run("--l1-size-gb", "1", "--numa-placement", "OFF").config().describe().get("numa_placement"));
        assertTrue(refused("--l1-size-gb", "1", "--numa-placement", "interleave").contains("--numa-placement: must be auto or off"));
    }

    @Test
    void theBackgroundWarmupIsOnByDefaultOnlyOnHostsWithCoresToSpare() {
        assertEquals(0, OperatorSettings.defaultBackgroundMs(2), "a small host keeps its cores for the engine's own start");
        assertEquals(0, OperatorSettings.defaultBackgroundMs(Tuning.SPIN_MIN_CORES - 1));
        assertEquals(OperatorSettings.DEFAULT_WARMUP_BACKGROUND_MS, OperatorSettings.defaultBackgroundMs(Tuning.SPIN_MIN_CORES));
        long auto = OperatorSettings.defaultBackgroundMs(Runtime.getRuntime().availableProcessors());
        assertEquals(auto, run("--l1-size-gb", "1").config().describe().get("warmup_background_ms"), "auto unless set");
        assertEquals(auto, run("--l1-size-gb", "1", "--warmup-background-ms", "AUTO").config().describe().get("warmup_background_ms"));
        assertEquals(2_500_000_000L, run("--l1-size-gb", "1", "--warmup-background-ms", "2500").config().operator().warmupBackgroundNs());
        assertEquals(0L, run("--l1-size-gb", "1", "--warmup-background-ms", "0").config().operator().warmupBackgroundNs());
        for (String bad : new String[] {"-1", "600001", "soon", ""}) {
            assertTrue(refused("--l1-size-gb", "1", "--warmup-background-ms", bad).contains("--warmup-background-ms"), bad);
        }
    }

    @Test
    void theMappingBudgetDefaultsUnderTheKernelsLimitAndIsValidated() {
        long mapCount = OperatorSettings.maxMapCount();
        assertTrue(mapCount >= 1024, "vm.max_map_count read whole: " + mapCount);
        OperatorSettings defaults = run("--l1-size-gb", "1").config().operator();
        assertEquals(Math.max(1, mapCount / 4), defaults.shmMaxSegments(), "a quarter of vm.max_map_count");
        assertEquals(16_384L << 30, defaults.shmMaxMappedBytes());
        OperatorSettings set = run("--l1-size-gb", "1", "--shm-max-segments", "1000", "--shm-max-mapped-gb", "2").config().operator();
        assertEquals(1000, set.shmMaxSegments());
        assertEquals(2L << 30, set.shmMaxMappedBytes());
        assertEquals(1000, run("--l1-size-gb", "1", "--shm-max-segments", "1000").config().describe().get("shm_max_segments"));
        for (String bad : new String[] {"0", "-1", "many", Long.toString(mapCount / 2 + 1)}) {
            assertTrue(refused("--l1-size-gb", "1", "--shm-max-segments", bad).contains("--shm-max-segments: must"), bad);
        }
        assertTrue(refused("--l1-size-gb", "1", "--shm-max-mapped-gb", "0").contains("--shm-max-mapped-gb: must"));
    }

    @Test
    void cpuCopyThreadsIsAutoOrACountInItsRange() throws Exception {
        assertEquals(0, run("--l1-size-gb", "1").config().operator().cpuCopyThreads(), "auto");
        assertEquals("auto", run("--l1-size-gb", "1").config().describe().get("cpu_copy_threads"));
        assertEquals(4, run("--l1-size-gb", "1", "--cpu-copy-threads", "4").config().operator().cpuCopyThreads());
        assertEquals(1, run("--l1-size-gb", "1", "--cpu-copy-threads", "1").config().describe().get("cpu_copy_threads"));
        for (String bad : new String[] {"0", "-1", "many", "257"}) {
            assertTrue(refused("--l1-size-gb", "1", "--cpu-copy-threads", bad).contains("--cpu-copy-threads: must"), bad);
        }
    }
}
