package io.lmcache.server.storage;

import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;

/** Whether the pool gets huge pages, read from the host's mounts and transparent-huge-page settings (as the H200 hosts show them). */
class HugePagesTest {
    private static final String NEVER = "always within_size advise [never] deny force";
    /** A container's /dev/shm: the host's tmpfs, then the container's own on top of it. */
    private static final String STACKED = """
            proc /proc proc rw,nosuid,nodev,noexec,relatime 0 0
            tmpfs /dev/shm tmpfs rw,relatime,size=131981020k 0 0
            tmpfs /dev/shm tmpfs rw,relatime,size=134217728k%s 0 0
            /dev/vda1 / ext4 rw,relatime 0 0
            """;

    @Test
    void aShmPoolGetsHugePagesWhenTheMountInEffectAsksForThem() {
        assertFalse(HugePages.shmHuge(STACKED.formatted(""), NEVER), "no huge= option: 4 KiB pages");
        assertTrue(HugePages.shmHuge(STACKED.formatted(",huge=advise"), NEVER), "huge=advise: MADV_HUGEPAGE gets them");
        assertTrue(HugePages.shmHuge(STACKED.formatted(",huge=within_size"), NEVER));
        assertFalse(HugePages.shmHuge(STACKED.formatted(",huge=never"), NEVER));
        String lowerOnly = "tmpfs /dev/shm tmpfs rw,huge=always 0 0\ntmpfs /dev/shm tmpfs rw,size=64k 0 0\n";
        assertFalse(HugePages.shmHuge(lowerOnly, NEVER), "only the last mount of /dev/shm is in effect");
        assertTrue(HugePages.shmHuge(STACKED.formatted(""), "always within_size advise never deny [force]"), "forced for every tmpfs");
        assertFalse(HugePages.shmHuge(STACKED.formatted(",huge=always"), "always within_size advise never [deny] force"), "denied");
        assertFalse(HugePages.shmHuge("", ""), "unreadable: no");
    }

    @Test
    void anonymousMemoryGetsThemWhenTransparentHugePagesAreAlwaysOrOnRequest() {
        assertTrue(HugePages.anonymousHuge("always [madvise] never"));
        assertTrue(HugePages.anonymousHuge("[always] madvise never"));
        assertFalse(HugePages.anonymousHuge("always madvise [never]"));
        assertFalse(HugePages.anonymousHuge(""));
        HugePages host = new HugePages(false, true);
        assertFalse(host.forPool(true));
        assertTrue(host.forPool(false));
    }
}
