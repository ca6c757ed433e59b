package io.lmcache.server.config;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

class ConnectionSettingsTest {
    @Test
    void theSoftLimitIsTheFirstNumberOfTheOpenFilesLine() {
        List<String> limits = List.of("Limit                     Soft Limit           Hard Limit           Units",
                "Max processes             unlimited            unlimited            processes",
                "Max open files            20000                1048576              files");
        assertEquals(20000, ConnectionSettings.parseOpenFileLimit(limits));
        assertEquals(-1, ConnectionSettings.parseOpenFileLimit(List.of("Max open files            unlimited            unlimited            files")));
        assertEquals(-1, ConnectionSettings.parseOpenFileLimit(List.of()));
    }

    @Test
    void theDefaultCapLeavesAQuarterOfTheDescriptorsAndAtLeast256() {
        assertEquals(15000, ConnectionSettings.defaultCap(20000), "the red team's 20 000: 5 000 stay for HTTP, L2 and the pool");
        assertEquals(768, ConnectionSettings.defaultCap(1024));
        assertEquals(ConnectionSettings.MIN_CONNECTIONS, ConnectionSettings.defaultCap(200));
        assertEquals(ConnectionSettings.UNKNOWN_LIMIT_DEFAULT, ConnectionSettings.defaultCap(-1));
    }

    @Test
    void aCapThatLeavesTooFewDescriptorsIsWarnedAbout() {
        List<String> warnings = new ArrayList<>();
        ConnectionSettings settings = ConnectionSettings.of(19_900, 30, 20000, warnings);
        assertEquals(19_900, settings.maxConnections());
        assertEquals(TimeUnit.SECONDS.toNanos(30), settings.stallTimeoutNs());
        assertEquals(1, warnings.size());
        assertTrue(warnings.get(0).startsWith("--max-connections 19900 leaves fewer than 256"), warnings.get(0));
        warnings.clear();
        assertEquals(15000, ConnectionSettings.of(null, 5, 20000, warnings).maxConnections());
        assertEquals(List.of(), warnings);
    }
}
