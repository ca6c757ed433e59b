package io.lmcache.server.diag;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.nio.file.attribute.FileTime;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** LMCache's lookup-hash file rules (lookup_hash.py@366ac586): naming, rotation by age and size, the file cap, no link followed. */
class LookupHashFilesTest {
    /** 2024-04-01 00:00:00 UTC. */
    private static final double T0 = 1711929600.25;

    private static List<String> names(Path dir) throws IOException {
        try (var files = Files.list(dir)) {
            return files.map(p -> p.getFileName().toString()).sorted().toList();
        }
    }

    @Test
    void aFileIsNamedByItsFirstLinesUtcTimeAndACounterAndHoldsOneLinePerWrite(@TempDir Path dir) throws IOException {
        try (LookupHashFiles files = new LookupHashFiles(dir.resolve("new/sub"), 3600, 1 << 20, 10)) {
            files.write(T0, "{\"a\":1}");
            files.write(T0 + 1, "{\"a\":2}");
        }
        Path file = dir.resolve("new/sub/lookup_hashes_20240401_000000_000000.jsonl");
        assertEquals(List.of("{\"a\":1}", "{\"a\":2}"), Files.readAllLines(file));
        assertEquals("rw-------", PosixFilePermissions.toString(Files.getPosixFilePermissions(file)), "owner only: prompt fingerprints");
    }

    @Test
    void theCounterStartsAtTheFilesAlreadyThereAndTheyCountTowardsTheCap(@TempDir Path dir) throws IOException {
        Path old1 = Files.writeString(dir.resolve("lookup_hashes_20200101_000000_000000.jsonl"), "x\n");
        Path old2 = Files.writeString(dir.resolve("lookup_hashes_20200101_000001_000001.jsonl"), "y\n");
        Files.setLastModifiedTime(old1, FileTime.fromMillis(1_000));
        Files.setLastModifiedTime(old2, FileTime.fromMillis(2_000));
        Files.writeString(dir.resolve("other.jsonl"), "not ours\n");
        try (LookupHashFiles files = new LookupHashFiles(dir, 3600, 1 << 20, 2)) {
            files.write(T0, "{}");
        }
        assertEquals(List.of("lookup_hashes_20200101_000001_000001.jsonl", "lookup_hashes_20240401_000000_000002.jsonl", "other.jsonl"),
                names(dir), "the oldest by mtime went; other files stay");
    }

    @Test
    void aFileRotatesOnceItIsAsOldAsTheIntervalOrAsLargeAsTheMaxSize(@TempDir Path dir) throws IOException {
        try (LookupHashFiles files = new LookupHashFiles(dir, 60, 1 << 20, 100)) {
            files.write(T0, "a");
            files.write(T0 + 59.9, "b");
            files.write(T0 + 60, "c"); // as old as the interval: a new file, stamped with this line's time
        }
        assertEquals(List.of("lookup_hashes_20240401_000000_000000.jsonl", "lookup_hashes_20240401_000100_000001.jsonl"), names(dir));
        try (LookupHashFiles files = new LookupHashFiles(dir, 3600, 4, 100)) {
            files.write(T0, "abc"); // 4 bytes with its newline: the next write rotates
            files.write(T0, "d");
            files.write(T0, "e");
        }
        assertEquals(4, names(dir).size(), "two files before, the size rotation made a second one: " + names(dir));
        assertTrue(names(dir).contains("lookup_hashes_20240401_000000_000003.jsonl"), names(dir).toString());
        assertEquals(List.of("d", "e"), Files.readAllLines(dir.resolve("lookup_hashes_20240401_000000_000003.jsonl")));
    }

    @Test
    void atMostMaxFilesAreKeptTheOldestDeletedFirst(@TempDir Path dir) throws IOException {
        try (LookupHashFiles files = new LookupHashFiles(dir, 1, 1 << 20, 3)) {
            for (int i = 0; i < 6; i++) {
                files.write(T0 + i, "line " + i);
            }
            assertEquals(3, files.files().size());
        }
        assertEquals(List.of("lookup_hashes_20240401_000003_000003.jsonl", "lookup_hashes_20240401_000004_000004.jsonl",
                "lookup_hashes_20240401_000005_000005.jsonl"), names(dir));
    }

    @Test
    void noLinkIsFollowedNorCountedNorDeletedThroughAndAPlantedNameIsSkipped(@TempDir Path dir) throws IOException {
        Path outside = Files.createDirectory(dir.resolve("outside"));
        Path victim = Files.writeString(outside.resolve("victim"), "precious\n");
        Path logs = Files.createDirectory(dir.resolve("logs"));
        // a link that matches the glob: not an existing file of ours (the counter starts at 0), never deleted through
        Files.createSymbolicLink(logs.resolve("lookup_hashes_19990101_000000_000099.jsonl"), victim);
        // a link planted under the first name the writer will choose
        Files.createSymbolicLink(logs.resolve("lookup_hashes_20240401_000000_000000.jsonl"), victim);
        try (LookupHashFiles files = new LookupHashFiles(logs, 3600, 1 << 20, 1)) {
            files.write(T0, "secret line");
        }
        assertEquals("precious\n", Files.readString(victim), "nothing written through a link");
        Path written = logs.resolve("lookup_hashes_20240401_000000_000001.jsonl");
        assertTrue(Files.isRegularFile(written, LinkOption.NOFOLLOW_LINKS), "the planted name was skipped for the next one");
        assertEquals(List.of("secret line"), Files.readAllLines(written));
        assertTrue(Files.isSymbolicLink(logs.resolve("lookup_hashes_19990101_000000_000099.jsonl")), "a link is not ours to delete");
        assertFalse(Files.readString(victim).contains("secret"));
    }
}
