package io.lmcache.server.diag;

import io.lmcache.server.fleet.BatchRecorder;
import io.lmcache.server.logging.LogText;
import io.lmcache.server.logging.RateLimitedLog;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.LinkOption;
import java.nio.file.OpenOption;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.nio.file.attribute.PosixFilePermissions;
import java.time.ZoneOffset;
import java.time.ZonedDateTime;
import java.time.format.DateTimeFormatter;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.atomic.LongAdder;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The {@code events}-level trace ({@code --trace-level events}, fleet-and-operator-api.md §3.3): LMCache's
 * {@code EventsTraceRecorder} fed by its {@code TraceCacheEventSink} ({@code lmcache/v1/mp_coordinator/cache_events.py},
 * {@code trace/recorder.py}). The header (level {@code events}, {@code level_meta} with the instance id), then per stamped batch one
 * {@code events.batch} record whose {@code args} are the batch exactly as {@code POST /events} carries it, and the
 * {@code events.lifecycle} marks: {@code start} with the emitter's identity, {@code stop} at shutdown ({@code lmcache trace
 * replay-events} reads a file without it as a crash). {@code level_meta} leaves out {@code cache_event_schema_version}: LMCache's
 * replayer ({@code events_replay.py}) refuses any value but its own, which the sources do not pin [uncertain], and accepts none.
 *
 * <p>Bounded: past {@link #MAX_BYTES} records are dropped and counted (the {@code stop} mark has room kept for it). The file is
 * replaced if it exists, never through a symlink ({@code O_NOFOLLOW}), owner-only; {@link #close} writes the stop mark, fsyncs and
 * closes. Writes happen on {@code lmcache-coordinator-events} and the closing thread, one at a time.
 */
public final class EventsTrace implements BatchRecorder, AutoCloseable {
    private static final Logger LOG = LoggerFactory.getLogger(EventsTrace.class);
    private static final RateLimitedLog FAILED = new RateLimitedLog(LOG, "events trace write failures", 10);
    static final String BATCH = "events.batch";
    static final String LIFECYCLE = "events.lifecycle";
    static final long MAX_BYTES = 1L << 30;
    /** Kept free under the cap for the stop mark. */
    private static final long STOP_RESERVE = 4096;
    private static final Set<OpenOption> OPEN = Set.of(StandardOpenOption.CREATE, StandardOpenOption.TRUNCATE_EXISTING,
            StandardOpenOption.WRITE, LinkOption.NOFOLLOW_LINKS);
    private static final DateTimeFormatter STAMP = DateTimeFormatter.ofPattern("yyyyMMdd-HHmmss", Locale.ROOT);

    private final Path path;
    private final FileChannel channel;
    private final long monoStartNs = System.nanoTime();
    private final long maxBytes;
    private long bytes;
    private String instanceId;
    private boolean closed;
    final LongAdder records = new LongAdder();
    final LongAdder sizeCapped = new LongAdder();
    final LongAdder writeErrors = new LongAdder();

    private EventsTrace(Path path, String instanceId, String version, long maxBytes) throws IOException {
        this.path = path;
        this.instanceId = instanceId;
        this.maxBytes = maxBytes;
        this.channel = FileChannel.open(path, OPEN, PosixFilePermissions.asFileAttribute(PosixFilePermissions.fromString("rw-------")));
        Map<String, Object> meta = new LinkedHashMap<>();
        meta.put("instance_id", instanceId);
        meta.put("lmcache_version", version);
        frame(TraceFrames.header("events", monoStartNs / 1e9, System.currentTimeMillis() / 1000.0, meta));
    }

    /** Opens {@code output} ("" = {@link #defaultPath}) and writes the header. */
    public static EventsTrace open(String output, String instanceId, String version) throws IOException {
        return open(output.isEmpty() ? defaultPath() : Path.of(output), instanceId, version, MAX_BYTES);
    }

    static EventsTrace open(Path path, String instanceId, String version, long maxBytes) throws IOException {
        return new EventsTrace(path, instanceId, version, maxBytes);
    }

    /** LMCache's {@code _default_trace_path}: {@code $TMPDIR/lmcache-trace-<pid>-<YYYYMMDD-HHMMSS UTC>.lct}. */
    static Path defaultPath() {
        String tmp = System.getenv("TMPDIR");
        Path dir = Path.of(tmp == null || tmp.isBlank() ? System.getProperty("java.io.tmpdir") : tmp);
        return dir.resolve("lmcache-trace-" + ProcessHandle.current().pid() + "-" + STAMP.format(ZonedDateTime.now(ZoneOffset.UTC)) + ".lct");
    }

    public Path path() {
        return path;
    }

    /** The {@code /status} block: the file, its size, what was written and dropped. */
    public synchronized Map<String, Object> status() {
        Map<String, Object> status = new LinkedHashMap<>();
        status.put("level", "events");
        status.put("path", LogText.status(path)); // operator input: clipped like every echoed value
        status.put("bytes", bytes);
        status.put("records", records.sum());
        status.put("dropped_size_cap", sizeCapped.sum());
        status.put("dropped_write_error", writeErrors.sum());
        status.put("closed", closed);
        return status;
    }

    @Override
    public synchronized void started(Emitter emitter) {
        instanceId = emitter.instanceId();
        Map<String, Object> args = new LinkedHashMap<>();
        args.put("phase", "start");
        args.put("instance_id", emitter.instanceId());
        args.put("incarnation", emitter.incarnation());
        args.put("ip", emitter.ip());
        args.put("http_port", emitter.httpPort());
        args.put("mq_port", emitter.mqPort());
        write(LIFECYCLE, args, STOP_RESERVE);
    }

    @Override
    public synchronized void recorded(List<Map<String, Object>> batches) {
        for (Map<String, Object> batch : batches) {
            write(BATCH, batch, STOP_RESERVE);
        }
    }

    private void write(String qualname, Map<String, Object> args, long reserve) {
        if (closed) {
            return;
        }
        byte[] body = TraceFrames.record((System.nanoTime() - monoStartNs) / 1e9, System.currentTimeMillis() / 1000.0, qualname, args);
        if (bytes + 4 + body.length > maxBytes - reserve) {
            sizeCapped.increment();
            return;
        }
        try {
            frame(body);
            records.increment();
        } catch (IOException e) {
            writeErrors.increment();
            FAILED.warn("events trace {}: a record could not be written: {}", LogText.clip(path.toString()), LogText.clip(String.valueOf(e)));
        }
    }

    /** One frame in one write: its length and its body. */
    private void frame(byte[] body) throws IOException {
        ByteBuffer frame = ByteBuffer.allocate(4 + body.length);
        frame.putInt(body.length).put(body).flip();
        while (frame.hasRemaining()) {
            bytes += channel.write(frame);
        }
    }

    /** The stop mark, then fsync and close (LMCache: flush + fsync on SIGTERM). */
    @Override
    public synchronized void close() {
        if (closed) {
            return;
        }
        Map<String, Object> args = new LinkedHashMap<>();
        args.put("phase", "stop");
        args.put("instance_id", instanceId);
        write(LIFECYCLE, args, 0);
        closed = true;
        try (channel) {
            channel.force(true);
        } catch (IOException e) {
            LOG.warn("events trace {}: closing failed: {}", LogText.clip(path.toString()), LogText.clip(String.valueOf(e)));
        }
        LOG.info("events trace closed: {} ({} records, {} dropped)", LogText.clip(path.toString()), records.sum(),
                sizeCapped.sum() + writeErrors.sum());
    }
}
