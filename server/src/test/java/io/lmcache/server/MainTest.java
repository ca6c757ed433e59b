package io.lmcache.server;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.util.List;
import java.util.Optional;
import org.junit.jupiter.api.Test;

/** The notices the server logs as it starts: the configuration's warnings, then the launcher's, then a refused cache. */
class MainTest {
    @Test
    void theLaunchersNoticeAndARefusedCacheFollowTheConfigurationsWarnings() {
        assertEquals(List.of("a flag warning", "removed the stale cache", "the cache was refused"),
                Main.startupNotices(List.of("a flag warning"), " removed the stale cache\n", Optional.of("the cache was refused")));
    }

    @Test
    void nothingIsAddedWithoutANotice() {
        assertEquals(List.of("w"), Main.startupNotices(List.of("w"), null, Optional.empty()));
        assertEquals(List.of(), Main.startupNotices(List.of(), "  ", Optional.empty()));
    }
}
