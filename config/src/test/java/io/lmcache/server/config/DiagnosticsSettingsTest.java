package io.lmcache.server.config;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/** The diagnostics flags (fleet-and-operator-api.md §3.3, §3.4): LMCache's defaults, real options now, and what is refused. */
class DiagnosticsSettingsTest {
    private static ConfigLoader.Outcome load(String... args) {
        String[] all = new String[args.length + 2];
        all[0] = "--l1-size-gb";
        all[1] = "1";
        System.arraycopy(args, 0, all, 2, args.length);
        return ConfigLoader.load(all, Map.of(), MemoryLimits.unlimited());
    }

    private static ConfigLoader.Outcome.Run run(String... args) {
        ConfigLoader.Outcome outcome = load(args);
        return assertInstanceOf(ConfigLoader.Outcome.Run.class, outcome, outcome::toString);
    }

    @Test
    void offByDefaultWithLmcachesRotationDefaults() {
        DiagnosticsSettings off = run().config().diagnostics();
        assertFalse(off.lookupHashLogEnabled());
        assertEquals(21600, off.lookupHashRotationSeconds());
        assertEquals(104857600, off.lookupHashRotationMaxBytes());
        assertEquals(100, off.lookupHashMaxFiles());
        assertEquals(DiagnosticsSettings.TraceLevel.OFF, off.traceLevel());
        assertEquals("", off.traceOutput());
    }

    @Test
    void theFlagsHaveAnEffectAndConfigShowsThem() {
        ConfigLoader.Outcome.Run on = run("--lookup-hash-log-dir", "/var/log/lmc", "--lookup-hash-log-rotation-interval", "60",
                "--lookup-hash-log-rotation-max-size", "4096", "--lookup-hash-log-max-files", "3", "--trace-level", "events",
                "--trace-output", "/tmp/t.lct");
        DiagnosticsSettings settings = on.config().diagnostics();
        assertTrue(settings.lookupHashLogEnabled() && settings.eventsTrace());
        assertEquals(60, settings.lookupHashRotationSeconds());
        assertEquals(4096, settings.lookupHashRotationMaxBytes());
        assertEquals(3, settings.lookupHashMaxFiles());
        Map<String, Object> described = on.config().describe();
        assertEquals("/var/log/lmc", described.get("lookup_hash_log_dir"));
        assertEquals("events", described.get("trace_level"));
        assertEquals(List.of(), described.get("lmcache_flags_without_effect"), "no longer accepted without effect");
        assertTrue(on.warnings().isEmpty(), on.warnings().toString());
    }

    @Test
    void storageIsAcceptedWithAWarningAndOtherLevelsAndBadNumbersAreRefused() {
        ConfigLoader.Outcome.Run storage = run("--trace-level", "storage");
        assertEquals(DiagnosticsSettings.TraceLevel.STORAGE, storage.config().diagnostics().traceLevel());
        assertTrue(storage.warnings().stream().anyMatch(w -> w.contains("--trace-level storage")), storage.warnings().toString());
        for (String[] bad : new String[][] {{"--trace-level", "mq"}, {"--lookup-hash-log-max-files", "0"},
            {"--lookup-hash-log-rotation-interval", "soon"}, {"--lookup-hash-log-rotation-max-size", "-1"}}) {
            ConfigLoader.Outcome outcome = load(bad);
            assertFalse(outcome instanceof ConfigLoader.Outcome.Run, String.join(" ", bad));
            assertTrue(outcome.toString().contains(bad[0]), outcome.toString());
        }
    }
}
