package io.lmcache.server.transfer;

import io.lmcache.server.logging.RateLimitedLog;
import io.lmcache.server.metrics.ServerMetrics;
import io.lmcache.server.metrics.TransferCatalogue;
import java.io.IOException;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.MethodHandle;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.Map;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Opens CPU workers' shared-memory segments by the name a REGISTER carries. Any peer that reaches
 * the port picks that name, so nothing about it is trusted: the name is one path component under
 * /dev/shm (resolved once, and only used if it is a real directory on tmpfs owned by root or the
 * server's user); the segment must be a regular file, not a symbolic link at open
 * ({@code O_NOFOLLOW}) or at any check, with a single link (no hard link to another file), owned by
 * the server's own user (unless {@code --shm-allow-any-owner}) and at least as long as the wrapper
 * says. The file is opened once and every check reads the open descriptor, never the path again, so
 * a rename between check and map cannot swap the file. Never the server's own L1 pool file, by its
 * device and inode, whatever the name (a worker could otherwise RETRIEVE over other tenants' objects).
 * The mapping itself is shared per inode and budgeted by {@link SegmentMappings}. A refused segment
 * fails the REGISTER; the instance's STORE/RETRIEVE then answer false. Counted in
 * {@code lmcache_mp_shm_segments_refused_total{reason}} (the budget's refusals too).
 */
public final class ShmSegments {
    private static final Logger LOG = LoggerFactory.getLogger(ShmSegments.class);
    static final Path SHM_DIR = Path.of("/dev/shm");
    private static final String[] REASONS = {"bad_name", "missing", "symlink", "not_regular", "hard_link", "owner", "too_small",
        "shm_dir", "io", "server_pool", "register_segment_cap", "register_byte_cap", "server_segment_cap", "server_byte_cap"};
    private static final int STICKY = 01000;
    private static final int GROUP_OR_OTHER_WRITE = 0022;

    /** One mapped segment and the identity (device, inode) it had when it was opened. */
    record Segment(Path path, Object fileKey, long nbytes, SegmentMappings.Mapping mapping) {}

    private final Path dir;
    private final String dirProblem;
    private final int serverUid;
    private final boolean anyOwner;
    private final Object poolFileKey;
    private final SegmentMappings mappings;
    private final ServerMetrics metrics;
    private final RateLimitedLog refusedLog = new RateLimitedLog(LOG, 5);

    /** {@code poolFileKey}: the identity of the server's pool file, never mapped for a worker (null: the pool is anonymous). */
    public ShmSegments(boolean anyOwner, Object poolFileKey, SegmentMappings mappings, ServerMetrics metrics) {
        this(SHM_DIR, anyOwner, poolFileKey, mappings, metrics);
    }

    ShmSegments(Path shmDir, boolean anyOwner, Object poolFileKey, SegmentMappings mappings, ServerMetrics metrics) {
        this.anyOwner = anyOwner;
        this.poolFileKey = poolFileKey;
        this.mappings = mappings;
        this.metrics = metrics;
        this.serverUid = effectiveUid();
        for (String reason : REASONS) {
            metrics.declare(TransferCatalogue.SHM_SEGMENTS_REFUSED, reason);
        }
        Path resolved = null;
        String problem;
        try {
            resolved = shmDir.toRealPath();
            problem = Files.isDirectory(NoFollowOpen.procPath(0).getParent()) ? dirProblem(resolved)
                    : "/proc/self/fd is not mounted (segments are checked through it)";
        } catch (IOException e) {
            problem = shmDir + " is not usable: " + e.getMessage();
        }
        this.dir = resolved;
        this.dirProblem = problem;
        if (problem != null) {
            LOG.warn("{}: CPU workers' shared-memory tensors will be refused", problem);
        }
    }

    /** Null when {@code dir} is a directory on tmpfs that a stranger cannot swap files in, else what is wrong. */
    private String dirProblem(Path real) throws IOException {
        Map<String, Object> attributes = Files.readAttributes(real, "unix:mode,uid,isDirectory", LinkOption.NOFOLLOW_LINKS);
        if (!(Boolean) attributes.get("isDirectory")) {
            return real + " is not a directory";
        }
        String type = Files.getFileStore(real).type();
        if (!type.equals("tmpfs")) {
            return real + " is on " + type + ", not tmpfs";
        }
        int uid = (Integer) attributes.get("uid");
        int mode = (Integer) attributes.get("mode");
        if (uid != 0 && uid != serverUid) {
            return real + " belongs to uid " + uid + ", neither root nor this server's user";
        }
        if ((mode & GROUP_OR_OTHER_WRITE) != 0 && (mode & STICKY) == 0) {
            // Kubernetes' memory-backed emptyDir is 0777 without the sticky bit, so this is only a warning: anyone
            // may then rename files in it, but a file swapped in between the checks and the open either fails the
            // O_NOFOLLOW open or the inode comparison, or is a file the swapper owns, which gives nothing away
            LOG.warn("{} is writable by others without the sticky bit: any local user can rename workers' segments", real);
        }
        return null;
    }

    public SegmentMappings mappings() {
        return mappings;
    }

    /** The name in /dev/shm a wire name means (POSIX shm names may start with a slash). */
    static String localName(String wireName) {
        return wireName.startsWith("/") ? wireName.substring(1) : wireName;
    }

    /**
     * Opens the segment {@code wireName} names (tensor {@code index} of the REGISTER) and shares or makes its mapping of
     * {@code nbytes}, or says why not; the caller releases the mapping.
     */
    Segment map(int index, String wireName, long nbytes) throws LayoutException {
        if (dirProblem != null) {
            throw refused(index, wireName, "shm_dir", dirProblem);
        }
        String name = localName(wireName);
        if (!validName(name)) {
            throw refused(index, wireName, "bad_name", "not one name in /dev/shm");
        }
        Path path = dir.resolve(name);
        if (isServerPool(path)) {
            // refused before it is opened too: closing a descriptor of the pool may drop this process's lock on it (POSIX locks)
            throw refused(index, wireName, "server_pool", "is the server's own L1 pool");
        }
        int fd = NoFollowOpen.open(path);
        if (fd < 0) {
            throw switch (-fd) {
                case NoFollowOpen.ENOENT -> refused(index, wireName, "missing", "does not exist (the worker's process may be gone, or it"
                        + " runs in another IPC namespace: share /dev/shm with the server)");
                case NoFollowOpen.ELOOP -> refused(index, wireName, "symlink", "is a symbolic link");
                case NoFollowOpen.EISDIR, NoFollowOpen.ENXIO -> refused(index, wireName, "not_regular", "is not a regular file");
                default -> refused(index, wireName, "io", "cannot be opened (errno " + -fd + ")");
            };
        }
        // every check and the mapping go through the descriptor: what is checked is what is mapped, whatever is renamed
        // meanwhile in a directory anyone may write to (Kubernetes' emptyDir has no sticky bit). /proc/self/fd/N names the
        // open file itself: stat follows it to that inode (fstat), and opening it opens that inode again, never a path lookup
        Path opened = NoFollowOpen.procPath(fd);
        try {
            Object fileKey = checkAttributes(index, wireName, opened, nbytes);
            SegmentMappings.Mapping mapping = mappings.acquire(fileKey, nbytes, (length, arena) -> {
                try (FileChannel channel = FileChannel.open(opened, StandardOpenOption.READ, StandardOpenOption.WRITE)) {
                    return channel.map(FileChannel.MapMode.READ_WRITE, 0, length, arena);
                }
            });
            return new Segment(path, fileKey, nbytes, mapping);
        } catch (SegmentMappings.OverBudget e) {
            throw overBudget(e.reason, "tensor " + index + ": shared-memory segment " + e.getMessage());
        } catch (IOException e) {
            throw refused(index, wireName, "io", "cannot be mapped: " + e.getMessage());
        } finally {
            NoFollowOpen.close(fd);
        }
    }

    /** True when {@code path} (not followed) is the pool's inode. */
    private boolean isServerPool(Path path) {
        if (poolFileKey == null) {
            return false;
        }
        try {
            return poolFileKey.equals(Files.readAttributes(path, "unix:fileKey", LinkOption.NOFOLLOW_LINKS).get("fileKey"));
        } catch (IOException e) {
            return false;
        }
    }

    /** A REGISTER refused whole by the mapping budget: counted under {@code reason}, logged at a limited rate. */
    LayoutException overBudget(String reason, String why) {
        metrics.increment(TransferCatalogue.SHM_SEGMENTS_REFUSED, reason);
        refusedLog.warn("REGISTER refused ({}): {}", reason, why);
        return new LayoutException(why);
    }

    /** The open file's identity once its type, links, owner and size pass. */
    private Object checkAttributes(int index, String wireName, Path opened, long nbytes) throws IOException, LayoutException {
        Map<String, Object> attributes = Files.readAttributes(opened, "unix:isRegularFile,nlink,uid,size,fileKey");
        if (poolFileKey != null && poolFileKey.equals(attributes.get("fileKey"))) {
            throw refused(index, wireName, "server_pool", "is the server's own L1 pool");
        }
        if (!(Boolean) attributes.get("isRegularFile")) {
            throw refused(index, wireName, "not_regular", "is not a regular file");
        }
        int links = (Integer) attributes.get("nlink");
        if (links != 1) {
            throw refused(index, wireName, "hard_link", "has " + links + " hard links (a segment has one)");
        }
        int uid = (Integer) attributes.get("uid");
        if (!anyOwner && uid != serverUid) {
            throw refused(index, wireName, "owner", "belongs to uid " + uid + ", not to this server's user (uid " + serverUid
                    + "; --shm-allow-any-owner lifts this)");
        }
        long size = (Long) attributes.get("size");
        if (size < nbytes) {
            throw refused(index, wireName, "too_small", "has " + size + " bytes, the wrapper says " + nbytes);
        }
        return attributes.get("fileKey");
    }

    private static boolean validName(String name) {
        if (name.isEmpty() || name.length() > 255 || name.equals(".") || name.equals("..")) {
            return false;
        }
        for (int i = 0; i < name.length(); i++) {
            char c = name.charAt(i);
            if (c == '/' || c < 0x20 || c == 0x7f) {
                return false;
            }
        }
        return true;
    }

    private LayoutException refused(int index, String wireName, String reason, String why) {
        metrics.increment(TransferCatalogue.SHM_SEGMENTS_REFUSED, reason);
        String printable = wireName.length() > 80 ? wireName.substring(0, 80) + "..." : wireName;
        printable = printable.replaceAll("\\p{Cntrl}", "?");
        refusedLog.warn("REGISTER: shared-memory segment '{}' refused ({}): {}", printable, reason, why);
        return new LayoutException("tensor " + index + ": shared-memory segment '" + printable + "' " + why);
    }

    /** Null when the segment at {@code path} is still the inode we mapped and long enough, else what happened to it. */
    static String checkAlive(Segment segment) {
        try {
            Map<String, Object> attributes = Files.readAttributes(segment.path(), "unix:fileKey,size", LinkOption.NOFOLLOW_LINKS);
            if (!segment.fileKey().equals(attributes.get("fileKey"))) {
                return "segment " + segment.path() + " was replaced after registration";
            }
            long size = (Long) attributes.get("size");
            if (size < segment.nbytes()) {
                return "segment " + segment.path() + " was truncated to " + size + " bytes";
            }
            return null;
        } catch (NoSuchFileException e) {
            return "segment " + segment.path() + " was deleted after registration (the worker is gone)";
        } catch (IOException e) {
            return "segment " + segment.path() + ": " + e.getMessage();
        }
    }

    private static int effectiveUid() {
        try {
            Linker linker = Linker.nativeLinker();
            MemorySegment symbol = linker.defaultLookup().find("geteuid").orElseThrow();
            MethodHandle geteuid = linker.downcallHandle(symbol, FunctionDescriptor.of(ValueLayout.JAVA_INT));
            return (int) geteuid.invokeExact();
        } catch (Throwable t) {
            throw new IllegalStateException("cannot read this process's uid", t);
        }
    }
}
