package io.lmcache.server.config;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
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

/** The coordinator flags (fleet-and-operator-api.md §1.1): their defaults, the environment fallbacks, and what is refused. */
class FleetSettingsTest {
    private static ConfigLoader.Outcome load(Map<String, String> env, String... args) {
        String[] all = new String[args.length + 2];
        all[0] = "--l1-size-gb";
        all[1] = "1";
        System.arraycopy(args, 0, all, 2, args.length);
        return ConfigLoader.load(all, env, MemoryLimits.unlimited());
    }

    private static FleetSettings fleet(Map<String, String> env, String... args) {
        ConfigLoader.Outcome outcome = load(env, args);
        return assertInstanceOf(ConfigLoader.Outcome.Run.class, outcome, outcome::toString).config().fleet();
    }

    @Test
    void offUnlessAUrlIsGiven() {
        FleetSettings off = fleet(Map.of());
        assertFalse(off.enabled());
        assertFalse(off.eventsEnabled());
        assertFalse(fleet(Map.of(), "--coordinator-event-reporting").eventsEnabled(), "events need a coordinator");
    }

    @Test
    void lmcachesDefaultsAndTheHiddenAliases() {
        FleetSettings on = fleet(Map.of(), "--coordinator-url", "http://coordinator:9300/", "--coordinator-l2-event-reporting",
                "--coordinator-l2-event-flush-interval", "0.5");
        assertEquals("http://coordinator:9300", on.coordinatorUrl());
        assertEquals(TimeUnit.SECONDS.toNanos(5), on.heartbeatIntervalNs());
        assertTrue(on.eventsEnabled());
        assertEquals(TimeUnit.MILLISECONDS.toNanos(500), on.eventFlushIntervalNs());
        assertEquals("", on.advertiseIp());
    }

    @Test
    void aConfigFileTakesTheKeysAndTheirOldSpellings(@TempDir Path dir) throws IOException {
        Path file = dir.resolve("lmcache.toml");
        Files.writeString(file, "coordinator_url = \"http://c:9300\"\ncoordinator_l2_event_reporting = true\n"
                + "coordinator_l2_event_flush_interval = 2\n");
        FleetSettings fromFile = fleet(Map.of(), "--config-file", file.toString());
        assertEquals("http://c:9300", fromFile.coordinatorUrl());
        assertTrue(fromFile.eventsEnabled());
        assertEquals(TimeUnit.SECONDS.toNanos(2), fromFile.eventFlushIntervalNs());
    }

    @Test
    void theFlagBeatsTheEnvironment() {
        Map<String, String> env = Map.of("LMCACHE_COORDINATOR_URL", "http://env:9300", "LMCACHE_COORDINATOR_HEARTBEAT_INTERVAL", "2",
                "LMCACHE_COORDINATOR_EVENT_REPORTING", "true", "LMCACHE_COORDINATOR_ADVERTISE_IP", "10.0.0.7");
        FleetSettings fromEnv = fleet(env);
        assertEquals("http://env:9300", fromEnv.coordinatorUrl());
        assertEquals(TimeUnit.SECONDS.toNanos(2), fromEnv.heartbeatIntervalNs());
        assertTrue(fromEnv.eventsEnabled());
        assertEquals("10.0.0.7", fromEnv.advertiseIp());
        assertEquals("http://flag:9300", fleet(env, "--coordinator-url", "http://flag:9300").coordinatorUrl());
    }

    @ParameterizedTest
    @CsvSource(delimiter = '|', value = {
        "--coordinator-heartbeat-interval|0",
        "--coordinator-heartbeat-interval|-1",
        "--coordinator-event-flush-interval|0",
        "--coordinator-url|coordinator:9300",
        "--coordinator-url|ftp://coordinator",
        "--coordinator-url|http://user:secret@coordinator:9300",
        "--coordinator-advertise-ip|not an address",
    })
    void refused(String flag, String value) {
        ConfigLoader.Outcome outcome = load(Map.of(), "--coordinator-url", "http://coordinator:9300", flag, value);
        assertInstanceOf(ConfigLoader.Outcome.Exit.class, outcome, outcome::toString);
    }

    @Test
    void aCoordinatorNeedsTheHttpFrontend() {
        assertInstanceOf(ConfigLoader.Outcome.Exit.class, load(Map.of(), "--coordinator-url", "http://c:9300", "--http-port", "0"));
    }
}
