package io.lmcache.server.config;

import java.util.List;
import java.util.Locale;

/**
 * The operator diagnostics of LMCache's {@code lmcache server} (fleet-and-operator-api.md §3.3, §3.4): the lookup-hash log
 * ({@code --lookup-hash-log-*}, LMCache's {@code LookupHashLogConfig} in
 * {@code lmcache/v1/mp_observability/subscribers/logging/lookup_hash.py@366ac586}) and the trace recording
 * ({@code --trace-level}, {@code --trace-output}, LMCache's {@code lmcache/v1/mp_observability/trace/lifecycle.py}).
 *
 * @param lookupHashLogDir the directory of the JSONL files; "" = off
 * @param lookupHashRotationSeconds a file older than this is rotated before the next line
 * @param lookupHashRotationMaxBytes a file this large is rotated before the next line
 * @param lookupHashMaxFiles files kept in the directory (the oldest by mtime deleted beyond)
 * @param traceLevel {@link TraceLevel#OFF}, {@link TraceLevel#EVENTS} (recorded) or {@link TraceLevel#STORAGE} (accepted, warned)
 * @param traceOutput the trace file; "" = {@code $TMPDIR/lmcache-trace-<pid>-<UTC>.lct}, chosen at start
 */
public record DiagnosticsSettings(String lookupHashLogDir, long lookupHashRotationSeconds, long lookupHashRotationMaxBytes, int lookupHashMaxFiles,
        TraceLevel traceLevel, String traceOutput) {
    public static final long DEFAULT_ROTATION_SECONDS = 6 * 3600;
    public static final long DEFAULT_ROTATION_MAX_BYTES = 100L * 1024 * 1024;
    public static final int DEFAULT_MAX_FILES = 100;
    public static final DiagnosticsSettings OFF = new DiagnosticsSettings("", DEFAULT_ROTATION_SECONDS, DEFAULT_ROTATION_MAX_BYTES,
            DEFAULT_MAX_FILES, TraceLevel.OFF, "");

    /** LMCache's {@code TRACE_LEVELS} ({@code trace/lifecycle.py}): none (the default), {@code storage} or {@code events}. */
    public enum TraceLevel {
        OFF(""),
        /** LMCache's StorageManager call trace: Python qualnames and codecs, not reproducible here (§3.3): accepted with a warning. */
        STORAGE("storage"),
        /** The cache-event stream in wire form (LMCache's {@code EventsTraceRecorder}). */
        EVENTS("events");

        private final String flagValue;

        TraceLevel(String flagValue) {
            this.flagValue = flagValue;
        }

        public String flagValue() {
            return flagValue;
        }

        static TraceLevel parse(String text) throws ConfigException {
            String value = text == null ? "" : text.strip().toLowerCase(Locale.ROOT);
            for (TraceLevel level : values()) {
                if (level.flagValue.equals(value)) {
                    return level;
                }
            }
            throw new ConfigException("--trace-level", "must be one of " + List.of("storage", "events") + ", got '" + text.strip() + "'");
        }
    }

    public boolean lookupHashLogEnabled() {
        return !lookupHashLogDir.isEmpty();
    }

    public boolean eventsTrace() {
        return traceLevel == TraceLevel.EVENTS;
    }

    /** The flags, validated: LMCache's types and defaults; sizes and counts at least 1, an interval at least one second. */
    static DiagnosticsSettings validate(ServerOptions o, List<String> warnings) throws ConfigException {
        String dir = o.lookupHashLogDir == null ? "" : o.lookupHashLogDir.strip();
        long rotationSeconds = longIn("--lookup-hash-log-rotation-interval", o.lookupHashLogRotationInterval, 1, 365L * 24 * 3600);
        long rotationBytes = longIn("--lookup-hash-log-rotation-max-size", o.lookupHashLogRotationMaxSize, 1, 1L << 40);
        int maxFiles = (int) longIn("--lookup-hash-log-max-files", o.lookupHashLogMaxFiles, 1, 1_000_000);
        TraceLevel level = TraceLevel.parse(o.traceLevel);
        if (level == TraceLevel.STORAGE) {
            warnings.add("--trace-level storage is accepted for compatibility and records nothing: LMCache's storage trace names its Python"
                    + " StorageManager calls, which this server does not have (--trace-level events records the cache-event stream)");
        }
        String output = o.traceOutput == null ? "" : o.traceOutput.strip();
        return new DiagnosticsSettings(dir, rotationSeconds, rotationBytes, maxFiles, level, output);
    }

    private static long longIn(String flag, String text, long min, long max) throws ConfigException {
        long value;
        try {
            value = Long.parseLong(text.strip());
        } catch (NumberFormatException e) {
            throw new ConfigException(flag, "must be an integer, got '" + text.strip() + "'");
        }
        if (value < min || value > max) {
            throw new ConfigException(flag, "must be between " + min + " and " + max + ", got " + value);
        }
        return value;
    }
}
