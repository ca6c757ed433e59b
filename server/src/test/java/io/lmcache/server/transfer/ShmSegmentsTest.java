package io.lmcache.server.transfer;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.lmcache.server.metrics.ServerMetrics;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/** The rules for a segment name that came from the wire: one regular, single-link file of ours in /dev/shm, never through a link. */
class ShmSegmentsTest {
    private static final String COUNTER = "lmcache_mp.shm_segments_refused";
    private final ServerMetrics metrics = new ServerMetrics();
    private final SegmentMappings mappings = new SegmentMappings(new SegmentMappings.Caps(1000, 1L << 40, 65_530));
    private final ShmSegments segments = new ShmSegments(false, null, mappings, metrics);
    private final List<Path> created = new ArrayList<>();
    private final List<ShmSegments.Segment> mapped = new ArrayList<>();

    @AfterEach
    void cleanUp() throws IOException {
        mapped.forEach(segment -> mappings.release(segment.mapping()));
        assertEquals(0, mappings.segments(), "every use released: nothing stays mapped");
        for (Path path : created.reversed()) {
            Files.deleteIfExists(path);
        }
    }

    private Path shmFile(int bytes) throws IOException {
        Path path = Files.createTempFile(Path.of("/dev/shm"), "lmcache_segtest_", "");
        created.add(path);
        Files.write(path, new byte[bytes]);
        return path;
    }

    private Path tempTarget(byte[] content) throws IOException {
        Path path = Files.createTempFile("lmcache_segtest_target_", "");
        created.add(path);
        Files.write(path, content);
        return path;
    }

    private Path shmLink(Path target) throws IOException {
        Path link = Path.of("/dev/shm", "lmcache_segtest_link_" + ProcessHandle.current().pid() + "_" + created.size());
        created.add(link);
        Files.createSymbolicLink(link, target);
        return link;
    }

    private ShmSegments.Segment map(ShmSegments from, String name, long nbytes) throws LayoutException {
        ShmSegments.Segment segment = from.map(0, name, nbytes);
        mapped.add(segment);
        return segment;
    }

    private void assertRefused(String name, long nbytes, String reason) {
        assertRefused(segments, name, nbytes, reason);
    }

    private void assertRefused(ShmSegments from, String name, long nbytes, String reason) {
        double before = metrics.count(COUNTER, "reason", reason);
        int mappedBefore = mappings.segments();
        assertThrows(LayoutException.class, () -> from.map(0, name, nbytes), name);
        assertEquals(before + 1, metrics.count(COUNTER, "reason", reason), reason);
        assertEquals(mappedBefore, mappings.segments(), "a refused segment maps nothing");
    }

    @Test
    void aRegularSegmentOfOursMapsAndStaysAlive() throws Exception {
        Path path = shmFile(8192);
        ShmSegments.Segment segment = map(segments, "/" + path.getFileName(), 4096);
        assertEquals(4096, segment.mapping().memory.byteSize());
        assertNull(ShmSegments.checkAlive(segment));
    }

    @Test
    void aSymlinkIsRefusedAndItsTargetUntouched() throws Exception {
        byte[] content = "secret bytes that must stay put".getBytes();
        Path target = tempTarget(content);
        Path link = shmLink(target);
        assertRefused("/" + link.getFileName(), content.length, "symlink");
        // also a link to a file in /dev/shm itself
        Path inShm = shmFile(4096);
        assertRefused(shmLink(inShm).getFileName().toString(), 4096, "symlink");
        assertArrayEquals(content, Files.readAllBytes(target));
    }

    @Test
    void aSegmentReplacedByALinkAfterRegistrationIsDead() throws Exception {
        Path path = shmFile(4096);
        ShmSegments.Segment segment = map(segments, path.getFileName().toString(), 4096);
        Files.delete(path);
        Files.createSymbolicLink(path, tempTarget(new byte[4096]));
        assertNotNull(ShmSegments.checkAlive(segment));
    }

    @Test
    void directoriesHardLinksShortFilesAndBadNamesAreRefused() throws Exception {
        Path dir = Files.createTempDirectory(Path.of("/dev/shm"), "lmcache_segtest_dir_");
        created.add(dir);
        assertRefused(dir.getFileName().toString(), 1, "not_regular");
        Path file = shmFile(4096);
        Path hardLink = Path.of("/dev/shm", file.getFileName() + "_hard");
        Files.createLink(hardLink, file);
        created.add(hardLink);
        assertRefused(hardLink.getFileName().toString(), 4096, "hard_link");
        Files.delete(hardLink);
        assertRefused(file.getFileName().toString(), 8192, "too_small");
        for (String bad : new String[] {"", "/", "..", ".", "a/b", "../etc/passwd", "x\u0000y", "x".repeat(300)}) {
            assertRefused(bad, 1, "bad_name");
        }
        assertRefused("lmcache_segtest_missing_" + ProcessHandle.current().pid(), 1, "missing");
    }

    @Test
    void aSegmentOfAnotherUserIsRefusedUnlessAllowed() throws Exception {
        Path path = shmFile(4096);
        int ownUid = (Integer) Files.getAttribute(path, "unix:uid", LinkOption.NOFOLLOW_LINKS);
        // only root can give a file away; elsewhere the rule is covered by the other tests' own-uid files passing
        assumeTrue(ownUid == 0, "needs root to chown");
        Files.setAttribute(path, "unix:uid", 65534);
        assertRefused(path.getFileName().toString(), 4096, "owner");
        ShmSegments anyOwner = new ShmSegments(true, null, mappings, metrics);
        assertEquals(4096, map(anyOwner, path.getFileName().toString(), 4096).mapping().memory.byteSize());
    }

    /**
     * The checks and the mapping read the open descriptor (/proc/self/fd/N), not the path: a file renamed over the
     * segment's name after the open (a directory without the sticky bit allows it) is not what they see.
     */
    @Test
    void checksReadTheOpenFileNotThePathAgain() throws IOException {
        Path segment = shmFile(4096);
        Path swapped = shmFile(64);
        int fd = NoFollowOpen.open(segment);
        assertTrue(fd >= 0, "open: errno " + -fd);
        try {
            Object openedKey = Files.readAttributes(NoFollowOpen.procPath(fd), "unix:fileKey").get("fileKey");
            Files.move(swapped, segment, StandardCopyOption.REPLACE_EXISTING);
            assertEquals(openedKey, Files.readAttributes(NoFollowOpen.procPath(fd), "unix:fileKey").get("fileKey"));
            assertEquals(4096L, Files.size(NoFollowOpen.procPath(fd)));
            assertEquals(64L, Files.size(segment));
        } finally {
            NoFollowOpen.close(fd);
        }
        assertEquals(-NoFollowOpen.ELOOP, NoFollowOpen.open(shmLink(segment)));
    }

    @Test
    void oneFileIsMappedOnceWhateverItsNamesAndUsers() throws Exception {
        Path path = shmFile(8192);
        ShmSegments.Segment first = map(segments, path.getFileName().toString(), 4096);
        ShmSegments.Segment again = map(segments, "/" + path.getFileName(), 4096);
        assertSame(first.mapping(), again.mapping(), "one mapping for one inode");
        assertEquals(1, mappings.segments());
        ShmSegments.Segment longer = map(segments, path.getFileName().toString(), 8192);
        assertEquals(2, mappings.segments(), "a longer view maps again; the shorter lives on for its users");
        assertSame(longer.mapping(), map(segments, path.getFileName().toString(), 100).mapping(), "later users share the longest");
        mappings.release(first.mapping());
        mapped.remove(first);
        assertEquals(2, mappings.segments(), "the shorter mapping still has a user");
        mappings.release(again.mapping());
        mapped.remove(again);
        assertEquals(1, mappings.segments(), "its last user gone, it is unmapped");
    }

    @Test
    void theServersPoolIsRefusedByInodeWhateverTheName() throws Exception {
        Path pool = shmFile(4096);
        Object poolKey = Files.readAttributes(pool, "unix:fileKey").get("fileKey");
        ShmSegments guarded = new ShmSegments(false, poolKey, mappings, metrics);
        assertRefused(guarded, pool.getFileName().toString(), 4096, "server_pool");
        assertRefused(guarded, "/" + pool.getFileName(), 4096, "server_pool");
        Path renamed = Path.of("/dev/shm", pool.getFileName() + "_renamed");
        Files.move(pool, renamed);
        created.add(renamed);
        assertRefused(guarded, renamed.getFileName().toString(), 4096, "server_pool");
        Path hardLink = Path.of("/dev/shm", pool.getFileName() + "_hard");
        Files.createLink(hardLink, renamed);
        created.add(hardLink);
        assertRefused(guarded, hardLink.getFileName().toString(), 4096, "server_pool");
        assertNotNull(map(guarded, shmFile(4096).getFileName().toString(), 4096), "other files still map");
    }

    @Test
    void theServerWideBudgetRefusesAndChangesNothing() throws Exception {
        SegmentMappings small = new SegmentMappings(new SegmentMappings.Caps(2, 12_288, 65_530));
        ShmSegments budgeted = new ShmSegments(false, null, small, metrics);
        ShmSegments.Segment a = budgeted.map(0, shmFile(4096).getFileName().toString(), 4096);
        ShmSegments.Segment b = budgeted.map(0, shmFile(8192).getFileName().toString(), 8192);
        double before = metrics.count(COUNTER, "reason", "server_segment_cap");
        assertThrows(LayoutException.class, () -> budgeted.map(0, shmFile(4096).getFileName().toString(), 4096));
        assertEquals(before + 1, metrics.count(COUNTER, "reason", "server_segment_cap"));
        small.release(b.mapping());
        double bytesBefore = metrics.count(COUNTER, "reason", "server_byte_cap");
        assertThrows(LayoutException.class, () -> budgeted.map(0, shmFile(16_384).getFileName().toString(), 12_288));
        assertEquals(bytesBefore + 1, metrics.count(COUNTER, "reason", "server_byte_cap"));
        assertEquals(1, small.segments());
        small.release(a.mapping());
        assertEquals(0, small.segments());
    }
}
