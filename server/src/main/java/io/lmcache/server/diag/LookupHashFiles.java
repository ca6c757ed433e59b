package io.lmcache.server.diag;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.SeekableByteChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.DirectoryStream;
import java.nio.file.FileAlreadyExistsException;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.OpenOption;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.nio.file.attribute.BasicFileAttributes;
import java.nio.file.attribute.FileTime;
import java.nio.file.attribute.PosixFilePermissions;
import java.time.Instant;
import java.time.ZoneOffset;
import java.time.format.DateTimeFormatter;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.Deque;
import java.util.List;
import java.util.Locale;
import java.util.Set;

/**
 * LMCache's rotating lookup-hash files ({@code LookupHashLoggingSubscriber},
 * {@code lmcache/v1/mp_observability/subscribers/logging/lookup_hash.py@366ac586}): {@code lookup_hashes_<YYYYMMDD_HHMMSS UTC>_<NNNNNN>.jsonl},
 * the counter starting at the number of matching files already there; before each line a new file is started when there is none,
 * the current one is {@code rotationSeconds} old or {@code rotationMaxBytes} large; at most {@code maxFiles} are kept, earlier runs'
 * included, the oldest (by mtime at start, then by creation) deleted. A line is written and flushed whole.
 *
 * <p>Never through a symlink: a file is created new ({@code O_CREAT|O_EXCL}, which does not follow a link: a link planted under the
 * next name is skipped for the name after it), existing files are listed without following links (a link is never counted, kept
 * or deleted), and a deletion unlinks the name itself. Files are created owner-only ({@code 0600}): a line is a prompt's
 * fingerprint. Used by one thread.
 */
final class LookupHashFiles implements AutoCloseable {
    static final String PREFIX = "lookup_hashes_";
    static final String SUFFIX = ".jsonl";
    private static final DateTimeFormatter STAMP = DateTimeFormatter.ofPattern("yyyyMMdd_HHmmss", Locale.ROOT).withZone(ZoneOffset.UTC);
    private static final Set<OpenOption> CREATE = Set.of(StandardOpenOption.CREATE_NEW, StandardOpenOption.WRITE, LinkOption.NOFOLLOW_LINKS);
    /** Names taken by something else (a planted link, a clash) skipped before giving up on a rotation. */
    private static final int MAX_NAME_TRIES = 16;

    private final Path dir;
    private final long rotationSeconds;
    private final long rotationMaxBytes;
    private final int maxFiles;
    private final Deque<Path> files = new ArrayDeque<>();
    private int counter;
    private SeekableByteChannel current;
    private double openedAt;
    private long size;

    LookupHashFiles(Path dir, long rotationSeconds, long rotationMaxBytes, int maxFiles) throws IOException {
        Files.createDirectories(dir);
        this.dir = dir;
        this.rotationSeconds = rotationSeconds;
        this.rotationMaxBytes = rotationMaxBytes;
        this.maxFiles = maxFiles;
        files.addAll(existing(dir));
        counter = files.size();
    }

    /** The regular {@code lookup_hashes_*.jsonl} files in {@code dir}, oldest (by mtime) first; links are not followed nor listed. */
    static List<Path> existing(Path dir) throws IOException {
        record Found(Path path, FileTime mtime) {}
        List<Found> found = new ArrayList<>();
        try (DirectoryStream<Path> stream = Files.newDirectoryStream(dir, PREFIX + "*" + SUFFIX)) {
            for (Path path : stream) {
                BasicFileAttributes attributes = Files.readAttributes(path, BasicFileAttributes.class, LinkOption.NOFOLLOW_LINKS);
                if (attributes.isRegularFile()) {
                    found.add(new Found(path, attributes.lastModifiedTime()));
                }
            }
        }
        return found.stream().sorted(Comparator.comparing(Found::mtime).thenComparing(Found::path)).map(Found::path).toList();
    }

    /** Writes {@code line} (one JSON object, no newline) stamped {@code epochSeconds}, rotating first when due. */
    void write(double epochSeconds, String line) throws IOException {
        if (current == null || epochSeconds - openedAt >= rotationSeconds || size >= rotationMaxBytes) {
            rotate(epochSeconds);
        }
        ByteBuffer bytes = ByteBuffer.wrap((line + "\n").getBytes(StandardCharsets.UTF_8));
        while (bytes.hasRemaining()) {
            size += current.write(bytes);
        }
    }

    private void rotate(double epochSeconds) throws IOException {
        closeCurrent();
        String stamp = STAMP.format(Instant.ofEpochMilli((long) (epochSeconds * 1000)));
        for (int tries = 0; ; tries++) {
            Path path = dir.resolve(String.format(Locale.ROOT, "%s%s_%06d%s", PREFIX, stamp, counter++, SUFFIX));
            try {
                current = Files.newByteChannel(path, CREATE, PosixFilePermissions.asFileAttribute(PosixFilePermissions.fromString("rw-------")));
                files.addLast(path);
                break;
            } catch (FileAlreadyExistsException e) {
                if (tries + 1 >= MAX_NAME_TRIES) {
                    throw e;
                }
            }
        }
        openedAt = epochSeconds;
        size = 0;
        while (files.size() > maxFiles) {
            Files.deleteIfExists(files.removeFirst()); // unlink: the name itself, never what a link points to
        }
    }

    /** The files this writer keeps, oldest first (tests). */
    List<Path> files() {
        return List.copyOf(files);
    }

    private void closeCurrent() throws IOException {
        if (current != null) {
            SeekableByteChannel closing = current;
            current = null;
            closing.close();
        }
    }

    @Override
    public void close() throws IOException {
        closeCurrent();
    }
}
