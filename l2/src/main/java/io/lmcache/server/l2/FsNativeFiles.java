package io.lmcache.server.l2;

import java.io.IOException;
import java.lang.foreign.MemorySegment;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.NoSuchFileException;
import java.nio.file.OpenOption;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.nio.file.StandardOpenOption;
import java.nio.file.attribute.BasicFileAttributes;
import java.nio.file.attribute.UserDefinedFileAttributeView;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.PriorityQueue;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.BooleanSupplier;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * fs_native's files (hybrid-and-l2.md §B.6): one file per key, the object's raw bytes, no header, named as LMCache's
 * {@code key_to_filename} names them (LMCache/LMCache {@code csrc/storage_backends/keys.h} @4a3e5e7a, index id 67033925479):
 * {@code {model, "/" -> "-SEP-"}@0x{kv_rank:08x}@{object_group_id:x}@{chunk_hash hex}[@{cache_salt}].data}, flat in the base
 * directory, so a directory LMCache's fs_native adapter wrote serves here and the other way round (only the block-order fallback's
 * objects, bytes LMCache never writes, carry {@code @f{tag}} after the group, see {@link L2Key}). The object's full format ({@link L2Key#layout}) goes into
 * the extended attribute {@link #FORMAT_XATTR}, which LMCache neither writes nor reads: a file whose attribute names another
 * format is a miss, one without it (LMCache's) is taken when its size is the object's. A write goes to a temporary name unique to
 * the writer and is renamed into place, so two writers of one key never share a file and a reader sees a whole file or none
 * (LMCache #4991); a file shorter than its object is a miss and is removed. Nothing here follows a symbolic link. Thread-safe:
 * every call works on its own file handles.
 */
final class FsNativeFiles {
    enum Write { WROTE, EXISTED }

    /**
     * What a read or an existence check found: a whole file, none, a short one (removed), one of another size (kept), one whose
     * format attribute names another format (kept), or one whose format attribute is there but no format (kept: too long, not
     * UTF-8, empty or with control characters; never taken for a file without one).
     */
    enum Found { WHOLE, MISSING, SHORT, WRONG_SIZE, WRONG_FORMAT, BAD_FORMAT }

    /** {@link #recordedFormat}: an attribute is there, but its value is no format. Compared by identity. */
    static final String INVALID_FORMAT = new String("(invalid format attribute)");

    /** The extended attribute (user namespace) holding the object's format; LMCache's files have none. */
    static final String FORMAT_XATTR = "lmcache_format";
    /** A format longer than this is not recorded (an attribute value should stay small); the size check still applies. */
    static final int MAX_FORMAT_BYTES = 1024;

    private static final LinkOption[] NO_FOLLOW = {LinkOption.NOFOLLOW_LINKS};
    /** O_DIRECT ({@code com.sun.nio.file.DIRECT}), looked up by name: naming the JDK-internal type draws a warning. */
    private static final OpenOption DIRECT = directOption();
    /** Model, rank, group, our layout tag (foreign layouts only), hash, salt: LMCache forbids '@' in model and salt. */
    private static final Pattern NAME =
            Pattern.compile("([^@]+)@0x([0-9a-f]{8})@([0-9a-f]{1,8})(?:@f([0-9a-f]{1,8}))?@([0-9a-f]{64})(?:@([^@]+))?\\.data", Pattern.DOTALL);
    /** File names are at most 255 bytes; a temporary name adds its writer tag and counter to the final one. */
    private static final int MAX_NAME_BYTES = 255 - 48;

    private final Path base;
    private final Path tmpDir;
    private final boolean odirect;
    private final long blockBytes;
    private final String writerTag;
    private final AtomicLong nextTmp = new AtomicLong();
    final AtomicLong odirectFallbacks = new AtomicLong();
    /** Tests only: runs in {@link #read} between the check of the name and the open, where another writer may rename a file. */
    volatile Runnable beforeOpen = () -> { };
    /** Tests only: runs as {@link #write} starts (a slow disk). */
    volatile Runnable beforeWrite = () -> { };
    /** Runs once, when the file system first refuses a format attribute (the I/O logs it). */
    volatile Runnable onXattrsRefused = () -> { };
    private volatile String xattrRefusal;

    FsNativeFiles(Path base, String relativeTmpDir, boolean odirect) throws IOException {
        Files.createDirectories(base);
        this.base = base.toRealPath();
        this.tmpDir = relativeTmpDir.isEmpty() ? this.base : this.base.resolve(relativeTmpDir);
        Files.createDirectories(tmpDir);
        if (!Files.isDirectory(tmpDir, NO_FOLLOW)) {
            throw new IOException(tmpDir + " is not a directory (a symbolic link is not followed)");
        }
        this.odirect = odirect;
        this.blockBytes = Files.getFileStore(this.base).getBlockSize();
        this.writerTag = ProcessHandle.current().pid() + "-" + Long.toHexString(ThreadLocalRandom.current().nextLong());
    }

    Path base() {
        return base;
    }

    /**
     * The file name of a key (LMCache's {@code key_to_filename}: only the model's slashes are replaced, the salt goes in as it is),
     * or null when the key cannot be a file name: an '@' in model or salt (LMCache refuses those keys), a slash, backslash or NUL in
     * the salt, a NUL in the model, or too long.
     */
    static String fileName(L2Key key) {
        String salt = key.salt();
        if (key.model().indexOf('@') >= 0 || key.model().indexOf('\0') >= 0 || salt.indexOf('@') >= 0 || salt.indexOf('/') >= 0
                || salt.indexOf('\\') >= 0 || salt.indexOf('\0') >= 0) {
            return null;
        }
        String name = safe(key.model()) + "@0x" + key.kvRankHex() + key.groupFields() + "@" + key.hashHex() + (salt.isEmpty() ? "" : "@" + salt)
                + ".data";
        return name.getBytes(StandardCharsets.UTF_8).length > MAX_NAME_BYTES ? null : name;
    }

    /** The key a file of this name holds, or null when the name is not one {@link #fileName} gives (another version's, a stranger's). */
    static L2Key parse(String name) {
        Matcher m = NAME.matcher(name);
        if (!m.matches()) {
            return null;
        }
        int tag = m.group(4) == null ? 0 : Integer.parseUnsignedInt(m.group(4), 16);
        L2Key key = new L2Key(unsafe(m.group(1)), Integer.parseUnsignedInt(m.group(2), 16), Integer.parseUnsignedInt(m.group(3), 16),
                L2Hash.parse(m.group(5)), m.group(6) == null ? "" : m.group(6), tag, "");
        return name.equals(fileName(key)) ? key : null;
    }

    private static String safe(String part) {
        return part.replace("/", "-SEP-");
    }

    private static String unsafe(String part) {
        return part.replace("-SEP-", "/");
    }

    /**
     * Writes {@code src} as the file {@code name} with its {@code format} attribute ("" records none), unless a whole file of that
     * size is there already (LMCache's SET does the same: a key once stored is not written again).
     */
    Write write(String name, MemorySegment src, String format) throws IOException {
        beforeWrite.run();
        long length = src.byteSize();
        BasicFileAttributes existing = attributes(base.resolve(name));
        if (existing != null && existing.isRegularFile() && existing.size() == length) {
            return Write.EXISTED;
        }
        String stem = name.substring(0, name.length() - ".data".length());
        Path tmp = tmpDir.resolve(stem + "." + writerTag + "-" + nextTmp.getAndIncrement() + ".tmp");
        try {
            try (FileChannel channel = open(tmp, src, StandardOpenOption.CREATE_NEW, StandardOpenOption.WRITE)) {
                ByteBuffer buffer = src.asByteBuffer();
                while (buffer.hasRemaining()) {
                    channel.write(buffer);
                }
            }
            recordFormat(tmp, format);
            // rename(2) replaces the target atomically and never follows a link there
            Files.move(tmp, base.resolve(name), StandardCopyOption.ATOMIC_MOVE);
            return Write.WROTE;
        } catch (IOException | RuntimeException e) {
            Files.deleteIfExists(tmp);
            throw e;
        }
    }

    /**
     * Reads the file {@code name} into {@code dst}, which has the object's size. The size that counts is the size of the file
     * opened, not of whatever the name pointed to before (a writer may rename another file over it in between): a short one is
     * removed, one of another size is a miss and kept.
     */
    Found read(String name, MemorySegment dst, String format) throws IOException {
        Path path = base.resolve(name);
        BasicFileAttributes before = attributes(path);
        if (before == null || !before.isRegularFile()) {
            return Found.MISSING; // and never opened: a FIFO would block, a directory is no object
        }
        beforeOpen.run();
        long length = dst.byteSize();
        try (FileChannel channel = open(path, dst, StandardOpenOption.READ)) {
            long size = channel.size();
            if (size < length) {
                removeIfSize(path, size);
                return Found.SHORT;
            }
            if (size != length) {
                return Found.WRONG_SIZE;
            }
            Found formatFound = formatCheck(path, format);
            if (formatFound != Found.WHOLE) {
                return formatFound;
            }
            ByteBuffer buffer = dst.asByteBuffer();
            while (buffer.hasRemaining()) {
                if (channel.read(buffer) < 0) {
                    removeIfSize(path, channel.size());
                    return Found.SHORT;
                }
            }
            return Found.WHOLE;
        } catch (NoSuchFileException e) {
            return Found.MISSING;
        }
    }

    /**
     * Whether a whole file of {@code name} is there ({@code expectedBytes} 0: any size) in {@code format} ("": any, or one recording
     * none); a short one is removed.
     */
    Found exists(String name, long expectedBytes, String format) throws IOException {
        Path path = base.resolve(name);
        BasicFileAttributes attributes = attributes(path);
        if (attributes == null || !attributes.isRegularFile()) {
            return Found.MISSING;
        }
        if (expectedBytes > 0 && attributes.size() < expectedBytes) {
            removeIfSame(path, attributes);
            return Found.SHORT;
        }
        if (expectedBytes > 0 && attributes.size() != expectedBytes) {
            return Found.WRONG_SIZE;
        }
        return formatCheck(path, format);
    }

    // --- the format attribute --------------------------------------------------------------------

    /** Whether files get their format attribute: true until the file system refuses one (then sizes alone are checked). */
    boolean recordsFormats() {
        return xattrRefusal == null;
    }

    /** Why the file system refused the format attribute, or null while it takes them. */
    String xattrRefusal() {
        return xattrRefusal;
    }

    /** Records {@code format} on the (temporary) file; the first refusal turns recording off for good: it is counted and logged once. */
    private void recordFormat(Path file, String format) {
        byte[] bytes = format.getBytes(StandardCharsets.UTF_8);
        if (bytes.length == 0 || bytes.length > MAX_FORMAT_BYTES || xattrRefusal != null) {
            return;
        }
        try {
            UserDefinedFileAttributeView view = Files.getFileAttributeView(file, UserDefinedFileAttributeView.class, NO_FOLLOW);
            if (view == null) {
                throw new UnsupportedOperationException("no user-defined attribute view");
            }
            view.write(FORMAT_XATTR, ByteBuffer.wrap(bytes));
        } catch (IOException | UnsupportedOperationException e) {
            synchronized (this) {
                if (xattrRefusal == null) {
                    xattrRefusal = e.toString();
                    onXattrsRefused.run();
                }
            }
        }
    }

    /**
     * {@link Found#WHOLE} when the file's format attribute is {@code format}, or {@code format} is "" (not checked), or the file
     * has no attribute (LMCache wrote it, or the file system keeps none: its size was checked already);
     * {@link Found#WRONG_FORMAT} when it names another; {@link Found#BAD_FORMAT} when it is there but names none (junk is a
     * refusal, never "absent": an absent attribute is what lets a file of another layout but the same size be read).
     */
    private Found formatCheck(Path path, String format) {
        if (format.isEmpty() || xattrRefusal != null) {
            return Found.WHOLE;
        }
        String recorded = recordedFormat(path);
        if (recorded == INVALID_FORMAT) {
            return Found.BAD_FORMAT;
        }
        return recorded == null || recorded.equals(format) ? Found.WHOLE : Found.WRONG_FORMAT;
    }

    /**
     * The format attribute of the file; null when it has none (or the file system keeps none); {@link #INVALID_FORMAT} when one is
     * there but is no format: longer than {@link #MAX_FORMAT_BYTES}, empty, not UTF-8, with control characters, or unreadable.
     */
    static String recordedFormat(Path path) {
        UserDefinedFileAttributeView view = Files.getFileAttributeView(path, UserDefinedFileAttributeView.class, NO_FOLLOW);
        if (view == null) {
            return null;
        }
        try {
            if (!view.list().contains(FORMAT_XATTR)) {
                return null;
            }
        } catch (IOException | UnsupportedOperationException e) {
            return null; // ENOTSUP: the file system keeps none
        }
        try {
            if (view.size(FORMAT_XATTR) > MAX_FORMAT_BYTES) {
                return INVALID_FORMAT;
            }
            ByteBuffer value = ByteBuffer.allocate(MAX_FORMAT_BYTES);
            view.read(FORMAT_XATTR, value);
            value.flip();
            String text = StandardCharsets.UTF_8.newDecoder().onMalformedInput(CodingErrorAction.REPORT)
                    .onUnmappableCharacter(CodingErrorAction.REPORT).decode(value).toString();
            return text.isEmpty() || text.chars().anyMatch(Character::isISOControl) ? INVALID_FORMAT : text;
        } catch (IOException | UnsupportedOperationException e) {
            return INVALID_FORMAT; // listed, but not readable as a format (CharacterCodingException included)
        }
    }

    /** Removes the file {@code name} (a link is removed, not followed); true when there was one. */
    boolean delete(String name) throws IOException {
        return Files.deleteIfExists(base.resolve(name));
    }

    /** One object file found by {@link #scan}: its key, size and last modification. */
    record Scanned(L2Key key, long bytes, long modifiedMs) {}

    /**
     * The object files in the base directory, oldest first (at most {@code max}; links and other non-files skipped, never followed).
     *
     * @param unrecognized files ending in {@code .data} whose names are no key of this version
     * @param truncated true when there were more than {@code max} (the newest beyond it are left out)
     */
    record Scan(List<Scanned> files, int unrecognized, boolean truncated) {}

    Scan scan(int max, BooleanSupplier stop) throws IOException {
        // the newest on top: past max, the newest seen is dropped, so a bounded scan keeps the oldest (what eviction wants first)
        PriorityQueue<Scanned> oldest = new PriorityQueue<>(Comparator.comparingLong(Scanned::modifiedMs).reversed());
        int unrecognized = 0;
        boolean truncated = false;
        Map<String, String> names = new HashMap<>(); // one String per model and salt, however many files share it
        try (DirectoryStream<Path> entries = Files.newDirectoryStream(base, "*.data")) {
            for (Path entry : entries) {
                if (stop.getAsBoolean()) {
                    break;
                }
                BasicFileAttributes attributes = attributes(entry);
                if (attributes == null || !attributes.isRegularFile()) {
                    continue;
                }
                L2Key key = parse(entry.getFileName().toString());
                if (key == null) {
                    unrecognized++;
                    continue;
                }
                key = new L2Key(names.computeIfAbsent(key.model(), m -> m), key.kvRank(), key.objectGroup(), key.hash(),
                        names.computeIfAbsent(key.salt(), m -> m), key.layoutTag(), "");
                oldest.add(new Scanned(key, attributes.size(), attributes.lastModifiedTime().toMillis()));
                if (oldest.size() > max) {
                    oldest.poll();
                    truncated = true;
                }
            }
        }
        List<Scanned> files = new ArrayList<>(oldest);
        files.sort(Comparator.comparingLong(Scanned::modifiedMs));
        return new Scan(files, unrecognized, truncated);
    }

    /**
     * A page of the object files in the base directory in name order (LMCache object names only, of {@code model} when not null;
     * links and other non-files skipped, never followed; an object in a foreign layout, whose key has no LMCache name, left out).
     * The cursor is the last name of the page before: a directory's order changes as files come and go, a name's does not, so a
     * page never repeats a file and a file present throughout is listed once. Each page reads the whole directory, keeping only
     * {@code pageSize} + 1 names.
     */
    KeyPage list(String model, int pageSize, String afterName) throws IOException {
        // the largest on top: past pageSize + 1 the largest is dropped, so the queue keeps the page and whether there is more
        PriorityQueue<KeyPage.Entry> smallest = new PriorityQueue<>(Comparator.comparing((KeyPage.Entry e) -> fileName(e.key())).reversed());
        try (DirectoryStream<Path> entries = Files.newDirectoryStream(base, "*.data")) {
            for (Path entry : entries) {
                String name = entry.getFileName().toString();
                if (afterName != null && name.compareTo(afterName) <= 0) {
                    continue;
                }
                L2Key key = parse(name);
                if (key == null || key.layoutTag() != 0 || (model != null && !model.equals(key.model()))) {
                    continue;
                }
                BasicFileAttributes attributes = attributes(entry);
                if (attributes == null || !attributes.isRegularFile()) {
                    continue;
                }
                smallest.add(new KeyPage.Entry(key, attributes.size()));
                if (smallest.size() > pageSize + 1) {
                    smallest.poll();
                }
            }
        }
        List<KeyPage.Entry> page = new ArrayList<>(smallest);
        page.sort(Comparator.comparing(e -> fileName(e.key())));
        boolean more = page.size() > pageSize;
        if (more) {
            page = page.subList(0, pageSize);
        }
        return new KeyPage(page, more ? fileName(page.getLast().key()) : null);
    }

    /** Temporary files of writers that are gone: they are never read, only taking space. */
    List<Path> staleTemporaries(long olderThanMs) throws IOException {
        List<Path> stale = new ArrayList<>();
        long cutoffMs = System.currentTimeMillis() - olderThanMs;
        try (DirectoryStream<Path> entries = Files.newDirectoryStream(tmpDir, "*.tmp")) {
            for (Path entry : entries) {
                BasicFileAttributes attributes = attributes(entry);
                if (attributes != null && attributes.isRegularFile() && attributes.lastModifiedTime().toMillis() < cutoffMs) {
                    stale.add(entry);
                }
            }
        }
        return stale;
    }

    /** The opened file was {@code size} bytes, short: removed if the name still holds a file of that size (not a whole one renamed over it). */
    private static void removeIfSize(Path path, long size) throws IOException {
        BasicFileAttributes now = attributes(path);
        if (now != null && now.isRegularFile() && now.size() == size) {
            removeIfSame(path, now);
        }
    }

    /** A short file is removed only while it is still the file that was found short, never a newer one renamed over it. */
    private static void removeIfSame(Path path, BasicFileAttributes found) throws IOException {
        BasicFileAttributes now = attributes(path);
        if (now != null && Objects.equals(now.fileKey(), found.fileKey()) && now.size() == found.size()) {
            Files.deleteIfExists(path);
        }
    }

    private static BasicFileAttributes attributes(Path path) throws IOException {
        try {
            return Files.readAttributes(path, BasicFileAttributes.class, NO_FOLLOW);
        } catch (NoSuchFileException e) {
            return null;
        }
    }

    /**
     * Opens without following a link. With use_odirect, O_DIRECT when the buffer's address and length are multiples of the
     * file system's block size; otherwise (or where the file system refuses it) buffered, counted.
     */
    private static OpenOption directOption() {
        try {
            for (Object constant : Class.forName("com.sun.nio.file.ExtendedOpenOption").getEnumConstants()) {
                if (constant.toString().equals("DIRECT")) {
                    return (OpenOption) constant;
                }
            }
        } catch (ClassNotFoundException e) {
            // a JDK without it: use_odirect falls back to buffered I/O, counted
        }
        return null;
    }

    private FileChannel open(Path path, MemorySegment buffer, OpenOption... options) throws IOException {
        List<OpenOption> all = new ArrayList<>(List.of(options));
        all.add(LinkOption.NOFOLLOW_LINKS);
        if (odirect) {
            if (DIRECT != null && buffer.address() % blockBytes == 0 && buffer.byteSize() % blockBytes == 0) {
                all.add(DIRECT);
                try {
                    return FileChannel.open(path, all.toArray(OpenOption[]::new));
                } catch (IOException | UnsupportedOperationException e) {
                    all.remove(DIRECT);
                    // a CREATE_NEW that failed for O_DIRECT created nothing only if the open itself failed; remove a leftover
                    if (all.contains(StandardOpenOption.CREATE_NEW)) {
                        Files.deleteIfExists(path);
                    }
                }
            }
            odirectFallbacks.incrementAndGet();
        }
        return FileChannel.open(path, all.toArray(OpenOption[]::new));
    }
}
