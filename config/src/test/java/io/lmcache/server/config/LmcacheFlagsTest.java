package io.lmcache.server.config;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
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
        "--coordinator-url|http://coordinator:9300|the MP coordinator",
        "--engine-type|blend|CacheBlend",
        "--engine-type|blend_legacy|CacheBlend",
        "--runtime-plugin-locations|/opt/plugins|runtime plugins",
        "--enable|transfer_query|experimental transfer modules",
        "--l1-manager|{}|custom L1 managers"})
    void eachUnsupportedFeatureRefusesTheStart(String flag, String value, String feature) {
        assertActive(flag);
        String text = refused("--l1-size-gb", "1", flag, value);
        assertTrue(text.startsWith("lmcache-server: error: " + flag + ": "), text);
        assertTrue(text.contains(feature) && text.contains("is not supported by lmcache-server"), text);
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
}
