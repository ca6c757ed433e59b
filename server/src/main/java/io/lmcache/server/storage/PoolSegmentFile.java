package io.lmcache.server.storage;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.channels.FileLock;
import java.nio.channels.OverlappingFileLockException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.Arrays;
import java.util.Map;
import java.util.Set;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The pool's file in /dev/shm and its marker: one page after the pool's bytes that starts with a
 * magic string and the pool's size, written right after the file is created and locked. A file
 * is a dead server's pool only if it ends in that page (and nobody holds its lock); anything else
 * under the name (a worker's KV segment, a file of another program) is never deleted.
 *
 * <p>Why a trailer and not an extended attribute ({@code user.lmcache.pool}): tmpfs accepts user
 * xattrs only from Linux 6.6, and the GPU hosts and containers this runs on may be older; the
 * trailer works on every kernel, travels with the inode like an xattr would, lies outside the
 * pool's mapping (workers map exactly the pool's size) and costs one page.
 */
final class PoolSegmentFile {
    private static final Logger LOG = LoggerFactory.getLogger(PoolSegmentFile.class);
    static final long MARKER_BYTES = 4096;
    private static final byte[] MAGIC = "lmcache-l1-pool\n".getBytes(StandardCharsets.US_ASCII);

    /** What was under a name. */
    enum State {
        /** A dead server's pool, now deleted (or nothing there any more). */
        REMOVED,
        /** A pool a running server holds the lock on. */
        LIVE_POOL,
        /** Not a pool: left alone. */
        NOT_A_POOL
    }

    /** The state and, for {@link State#NOT_A_POOL}, why. */
    record Found(State state, String detail) {}

    private PoolSegmentFile() {}

    /** Writes the marker after {@code poolBytes} bytes; the file is then {@code poolBytes + MARKER_BYTES} long (sparse below). */
    static void writeMarker(FileChannel channel, long poolBytes) throws IOException {
        ByteBuffer page = ByteBuffer.allocate((int) MARKER_BYTES);
        page.put(MAGIC).putLong(poolBytes).putLong(ProcessHandle.current().pid()).clear();
        while (page.hasRemaining()) {
            channel.write(page, poolBytes + page.position());
        }
    }

    /** True when the open file ends in a marker that matches its own size. */
    static boolean isMarked(FileChannel channel) throws IOException {
        long size = channel.size();
        if (size < MARKER_BYTES) {
            return false;
        }
        ByteBuffer head = ByteBuffer.allocate(MAGIC.length + Long.BYTES);
        while (head.hasRemaining()) {
            if (channel.read(head, size - MARKER_BYTES + head.position()) < 0) {
                return false;
            }
        }
        head.flip();
        byte[] magic = new byte[MAGIC.length];
        head.get(magic);
        return Arrays.equals(magic, MAGIC) && head.getLong() == size - MARKER_BYTES;
    }

    /**
     * Deletes {@code path} if it is a dead server's pool: a regular file (never through a link)
     * with the marker, that nobody holds the lock on, and still the same inode when deleted.
     */
    static Found removeIfStale(Path path) {
        try {
            Map<String, Object> attributes = Files.readAttributes(path, "unix:isRegularFile,fileKey", LinkOption.NOFOLLOW_LINKS);
            if (!(Boolean) attributes.get("isRegularFile")) {
                return new Found(State.NOT_A_POOL, "is not a regular file");
            }
            try (FileChannel channel = FileChannel.open(path, Set.of(StandardOpenOption.READ, StandardOpenOption.WRITE,
                    LinkOption.NOFOLLOW_LINKS))) {
                if (!isMarked(channel)) {
                    return new Found(State.NOT_A_POOL, "carries no lmcache pool marker");
                }
                FileLock lock;
                try {
                    lock = channel.tryLock();
                } catch (OverlappingFileLockException e) {
                    return new Found(State.LIVE_POOL, "");
                }
                if (lock == null) {
                    return new Found(State.LIVE_POOL, "");
                }
                try {
                    Object now = Files.readAttributes(path, "unix:fileKey", LinkOption.NOFOLLOW_LINKS).get("fileKey");
                    if (!attributes.get("fileKey").equals(now)) {
                        return new Found(State.NOT_A_POOL, "was replaced while it was inspected");
                    }
                    Files.delete(path);
                    LOG.warn("removed stale L1 pool segment {} left by a server that is gone", path);
                    return new Found(State.REMOVED, "");
                } finally {
                    lock.release();
                }
            }
        } catch (NoSuchFileException e) {
            return new Found(State.REMOVED, "");
        } catch (IOException e) {
            return new Found(State.NOT_A_POOL, "cannot be inspected (" + e.getMessage() + ")");
        }
    }
}
