package io.lmcache.server.fleet;

import com.fasterxml.jackson.databind.JsonNode;
import io.lmcache.server.logging.LogText;
import io.lmcache.server.logging.RateLimitedLog;
import java.io.IOException;
import java.net.DatagramSocket;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.URI;
import java.net.URLEncoder;
import java.nio.charset.StandardCharsets;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.LongAdder;
import java.util.concurrent.locks.LockSupport;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * LMCache's registrar ({@code lmcache/v1/mp_coordinator/registrar.py}, {@code keep_registered}) on its own thread: register with
 * {@code POST /instances}, then {@code PUT /instances/{id}/heartbeat} every interval; a 404 means the coordinator forgot this
 * server (it restarted), so the id is dropped and the next tick registers again; any other failure keeps the id and retries next
 * tick. After every registration {@code onRegistered} runs (the capacity re-declaration: the coordinator keeps it in memory
 * only). {@link #close} deregisters ({@code DELETE /instances/{id}}, errors ignored). Nothing here stops the server serving.
 */
public final class Membership implements AutoCloseable {
    private static final Logger LOG = LoggerFactory.getLogger(Membership.class);
    private static final RateLimitedLog FAILURES = new RateLimitedLog(LOG, "coordinator registration/heartbeat failures", 10);

    /** What registration sends besides the id: the address and HTTP port the coordinator calls. */
    public record Advertised(String ip, int httpPort) {}

    private final CoordinatorHttp http;
    private final String wantedId;
    private final Advertised advertised;
    private final long intervalNs;
    private final Runnable onRegistered;
    private final Thread thread;
    private volatile boolean running = true;
    private volatile String assignedId;
    final LongAdder registrations = new LongAdder();
    final LongAdder heartbeats = new LongAdder();
    final LongAdder failures = new LongAdder();
    final LongAdder forgotten = new LongAdder();

    Membership(CoordinatorHttp http, String instanceId, Advertised advertised, long intervalNs, Runnable onRegistered) {
        this.http = http;
        this.wantedId = instanceId;
        this.advertised = advertised;
        this.intervalNs = intervalNs;
        this.onRegistered = onRegistered;
        this.thread = Thread.ofPlatform().daemon().name("lmcache-coordinator").unstarted(this::run);
    }

    void start() {
        thread.start();
    }

    /** The id the coordinator knows this server by, or null while not registered. */
    public String assignedId() {
        return assignedId;
    }

    private void run() {
        while (running) {
            try {
                tick();
            } catch (InterruptedException e) {
                return;
            } catch (IOException | RuntimeException e) {
                failures.increment();
                FAILURES.warn("coordinator {} registration/heartbeat failed: {}", LogText.clip(http.baseUrl()), LogText.clip(String.valueOf(e)));
            }
            long wakeNs = System.nanoTime() + intervalNs;
            for (long leftNs = intervalNs; running && leftNs > 0; leftNs = wakeNs - System.nanoTime()) {
                LockSupport.parkNanos(leftNs);
                if (Thread.interrupted()) {
                    return;
                }
            }
        }
    }

    /** One round of {@code keep_registered}: register when not registered, else heartbeat. */
    void tick() throws IOException, InterruptedException {
        String id = assignedId;
        if (id == null) {
            CoordinatorHttp.Reply reply = http.send("POST", "/instances", registration());
            JsonNode assigned = reply.body().path("instance_id");
            if (!reply.ok() || !assigned.isTextual() || assigned.asText().isBlank()) {
                throw new IOException("POST /instances answered " + reply.status());
            }
            assignedId = assigned.asText();
            registrations.increment();
            LOG.info("registered with the coordinator {} as {} (re_registered: {})", LogText.clip(http.baseUrl()),
                    LogText.clip(assignedId), reply.body().path("re_registered").asBoolean(false));
            onRegistered.run();
            return;
        }
        CoordinatorHttp.Reply reply = http.send("PUT", "/instances/" + PathSegment.encode(id) + "/heartbeat", null);
        if (reply.status() == 404) {
            forgotten.increment();
            LOG.info("the coordinator no longer knows {}; registering again", LogText.clip(id));
            assignedId = null;
        } else if (!reply.ok()) {
            throw new IOException("PUT /instances/{id}/heartbeat answered " + reply.status());
        } else {
            heartbeats.increment();
        }
    }

    private Map<String, Object> registration() {
        Map<String, Object> body = new LinkedHashMap<>();
        body.put("ip", advertised.ip());
        body.put("http_port", advertised.httpPort());
        body.put("instance_id", wantedId);
        body.put("metadata", Map.of());
        // P2P is out of scope here: never a source or a reader (§1.7)
        body.put("p2p_advertised_url", "");
        body.put("mq_port", 0);
        return body;
    }

    /** {@code --coordinator-advertise-ip}, else the local address a packet to the coordinator would leave from (none is sent). */
    static String advertiseIp(String configured, String coordinatorUrl) {
        if (!configured.isEmpty()) {
            return configured;
        }
        URI uri = URI.create(coordinatorUrl);
        try (DatagramSocket probe = new DatagramSocket()) {
            probe.connect(new InetSocketAddress(uri.getHost(), uri.getPort() < 0 ? 80 : uri.getPort()));
            InetAddress local = probe.getLocalAddress();
            if (local != null && !local.isAnyLocalAddress()) {
                return local.getHostAddress();
            }
        } catch (IOException | RuntimeException e) {
            LOG.warn("cannot tell the outbound address towards {}: {}", LogText.clip(coordinatorUrl), LogText.clip(String.valueOf(e)));
        }
        try {
            return InetAddress.getLocalHost().getHostAddress();
        } catch (IOException e) {
            return "127.0.0.1";
        }
    }

    /** Stops the loop, then deregisters (idempotent on the coordinator; errors only logged). */
    @Override
    public void close() {
        running = false;
        thread.interrupt();
        try {
            thread.join(TimeUnit.SECONDS.toMillis(5));
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        String id = assignedId;
        if (id != null) {
            try {
                CoordinatorHttp.Reply reply = http.send("DELETE", "/instances/" + PathSegment.encode(id), null);
                LOG.info("deregistered {} from the coordinator ({})", LogText.clip(id), reply.status());
            } catch (IOException | RuntimeException e) {
                LOG.warn("deregistration from the coordinator failed: {}", LogText.clip(String.valueOf(e)));
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
            assignedId = null;
        }
    }

    /** An id as one URL path segment (the coordinator may assign any string). */
    static final class PathSegment {
        private PathSegment() {}

        static String encode(String id) {
            return URLEncoder.encode(id, StandardCharsets.UTF_8).replace("+", "%20");
        }
    }
}
