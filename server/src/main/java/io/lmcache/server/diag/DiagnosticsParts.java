package io.lmcache.server.diag;

import io.lmcache.server.agent.AgentErrors;
import io.lmcache.server.agent.AgentRunner;
import io.lmcache.server.agent.IdleStrategy;
import io.lmcache.server.config.DiagnosticsSettings;
import io.lmcache.server.config.ServerConfig;
import io.lmcache.server.logging.LogText;
import io.lmcache.server.metrics.DiagnosticsCatalogue;
import io.lmcache.server.metrics.ServerMetrics;
import io.lmcache.server.tier.ObjectShapes;
import io.lmcache.server.tier.RegisteredShapes;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Path;
import java.util.concurrent.TimeUnit;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * What the diagnostics parts of {@code ServerParts} open (issue 49, fleet-and-operator-api.md §3.3, §3.4): the lookup-hash log's
 * writer on its own thread, and the events trace; each with its series.
 */
public final class DiagnosticsParts {
    private static final Logger LOG = LoggerFactory.getLogger(DiagnosticsParts.class);
    private static final long MAX_PARK_NS = TimeUnit.MILLISECONDS.toNanos(50);
    private static final long CLOSE_TIMEOUT_NS = TimeUnit.SECONDS.toNanos(5);

    private DiagnosticsParts() {}

    /**
     * The writer of {@code queue}'s LOOKUPs into {@code --lookup-hash-log-dir} (created if missing; a directory that cannot be made
     * stops the start, as LMCache's {@code mkdir}), reading the shapes of the transfer modules that are on (null: off).
     */
    public static AgentRunner lookupHashWriter(ServerConfig config, LookupHashLog queue, ServerMetrics metrics, ObjectShapes lmcacheDriven,
            ObjectShapes engineDriven, AgentErrors errors) {
        DiagnosticsSettings settings = config.diagnostics();
        LookupHashFiles files;
        try {
            files = new LookupHashFiles(Path.of(settings.lookupHashLogDir()), settings.lookupHashRotationSeconds(),
                    settings.lookupHashRotationMaxBytes(), settings.lookupHashMaxFiles());
        } catch (IOException e) {
            throw new UncheckedIOException("--lookup-hash-log-dir " + settings.lookupHashLogDir() + ": " + e.getMessage(), e);
        }
        RegisteredShapes shapes = new RegisteredShapes();
        if (lmcacheDriven != null) {
            shapes.add(lmcacheDriven);
        }
        if (engineDriven != null) {
            shapes.add(engineDriven);
        }
        LookupHashWriter writer = new LookupHashWriter(queue, files, shapes, config.chunkSize());
        metrics.functionCounter(DiagnosticsCatalogue.LOOKUP_HASH_LINES, writer, w -> w.lines.sum());
        metrics.functionCounter(DiagnosticsCatalogue.LOOKUP_HASH_DROPPED, queue, q -> q.queueFull.sum(), "queue_full");
        metrics.functionCounter(DiagnosticsCatalogue.LOOKUP_HASH_DROPPED, writer, w -> w.writeErrors.sum(), "write_error");
        metrics.functionCounter(DiagnosticsCatalogue.LOOKUP_HASH_SALTED, queue, q -> q.salted.sum());
        LOG.info("lookup-hash log: {} (rotation every {} s or {} bytes, at most {} files; {} files there already)",
                LogText.clip(settings.lookupHashLogDir()), settings.lookupHashRotationSeconds(), settings.lookupHashRotationMaxBytes(),
                settings.lookupHashMaxFiles(), files.files().size());
        return new AgentRunner("lmcache-lookup-hashes", writer, IdleStrategy.backoff(MAX_PARK_NS), errors, CLOSE_TIMEOUT_NS);
    }

    /** The events trace at {@code --trace-output} (or the default path, logged at INFO); a file that cannot be opened stops the start. */
    public static EventsTrace eventsTrace(ServerConfig config, String version, ServerMetrics metrics) {
        EventsTrace trace;
        try {
            trace = EventsTrace.open(config.diagnostics().traceOutput(), config.instanceId(), "lmcache-server " + version);
        } catch (IOException e) {
            throw new UncheckedIOException("--trace-output " + config.diagnostics().traceOutput() + ": " + e, e);
        }
        LOG.info("trace recording enabled (level=events), writing to {}", LogText.clip(trace.path().toString()));
        metrics.functionCounter(DiagnosticsCatalogue.TRACE_RECORDS, trace, t -> t.records.sum());
        metrics.functionCounter(DiagnosticsCatalogue.TRACE_DROPPED, trace, t -> t.sizeCapped.sum(), "size_cap");
        metrics.functionCounter(DiagnosticsCatalogue.TRACE_DROPPED, trace, t -> t.writeErrors.sum(), "write_error");
        return trace;
    }
}
