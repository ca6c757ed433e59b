package io.lmcache.server.testing;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;
import java.io.IOException;
import java.io.OutputStream;
import java.io.UncheckedIOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.ArrayDeque;
import java.util.Deque;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.UUID;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.Executors;

/**
 * A reference LMCache coordinator for the tests, written from fleet-and-operator-api.md §1 and §5 (no Python): the registry
 * ({@code POST/GET /instances}, {@code PUT /instances/{id}/heartbeat} with 404 for an unknown id, {@code DELETE} 204), the event
 * gate of {@code POST /events} (per instance a cursor {@code (incarnation, seq)}: a lower incarnation is {@code stale}, a higher one
 * fences the instance's L1 placements and starts a new cursor, a seq at or below the cursor is a {@code duplicate}, one past
 * cursor+1 is admitted with a gap flagged; 422 when a key breaks LMCache's invariants), the placements and capacity views, the
 * eviction dispatcher ({@code DELETE /cache/objects} on a registered server, sent from the coordinator's own address), and
 * fault knobs: answer the next requests with a status, or restart (all state lost, as LMCache's in-memory coordinator).
 */
public final class ReferenceCoordinator implements AutoCloseable {
    private static final ObjectMapper JSON = new ObjectMapper();

    /** A registered server. */
    public record Instance(String id, String ip, int httpPort) {}

    /** A key's placement on one instance. */
    public record Placement(String instanceId, String tier, String backend, JsonNode key) {}

    private final InetAddress address;
    private int port;
    private HttpServer server;
    private final HttpClient client;
    // state (under this): wiped by a restart
    private final Map<String, Instance> instances = new LinkedHashMap<>();
    private final Map<String, long[]> cursors = new LinkedHashMap<>(); // id -> {incarnation, seq}
    private final Set<Placement> placements = new LinkedHashSet<>();
    private final Map<String, Long> capacities = new LinkedHashMap<>(); // "id/tier/backend" -> bytes
    private final Deque<String[]> faults = new ArrayDeque<>(); // {path, status}
    // history (kept across restarts: what the tests assert on)
    private final List<JsonNode> admitted = new CopyOnWriteArrayList<>();
    private final List<String> log = new CopyOnWriteArrayList<>();
    private int registrations;
    private int heartbeats;
    private int gaps;
    private int duplicates;
    private int stale;

    private ReferenceCoordinator(InetAddress address) throws IOException {
        this.address = address;
        this.client = HttpClient.newBuilder().localAddress(address).connectTimeout(Duration.ofSeconds(2)).build();
        bind();
    }

    /** A coordinator on {@code address} (a loopback address other than the servers' lets the tests tell its calls apart). */
    public static ReferenceCoordinator start(String address) {
        try {
            return new ReferenceCoordinator(InetAddress.getByName(address));
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    private void bind() throws IOException {
        server = HttpServer.create(new InetSocketAddress(address, port), 64); // port 0 at first: any free one, then kept
        port = server.getAddress().getPort();
        server.setExecutor(Executors.newVirtualThreadPerTaskExecutor());
        server.createContext("/", this::handle);
        server.start();
    }

    public String url() {
        return "http://" + address.getHostAddress() + ":" + port;
    }

    /** Stops and starts again on the same port with every state lost (heartbeats then get 404). */
    public void restart() {
        server.stop(0);
        synchronized (this) {
            instances.clear();
            cursors.clear();
            placements.clear();
            capacities.clear();
            faults.clear();
        }
        try {
            bind();
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    /** The next {@code count} requests to {@code path} are answered {@code status} with no effect. */
    public synchronized void failNext(String path, int status, int count) {
        for (int i = 0; i < count; i++) {
            faults.add(new String[] {path, Integer.toString(status)});
        }
    }

    public synchronized List<Instance> instances() {
        return List.copyOf(instances.values());
    }

    public synchronized int registrations() {
        return registrations;
    }

    public synchronized int heartbeats() {
        return heartbeats;
    }

    public synchronized int gaps() {
        return gaps;
    }

    public synchronized int duplicates() {
        return duplicates;
    }

    public synchronized int stale() {
        return stale;
    }

    /** Every batch the gate admitted, in order of arrival. */
    public List<JsonNode> admitted() {
        return List.copyOf(admitted);
    }

    public synchronized Set<Placement> placements() {
        return Set.copyOf(placements);
    }

    public synchronized Map<String, Long> capacities() {
        return Map.copyOf(capacities);
    }

    /** The eviction dispatcher: {@code DELETE /cache/objects} on a registered server, from this coordinator's address. */
    public HttpResponse<String> deleteObjects(String instanceId, List<JsonNode> keys, String tier, boolean force) {
        Map<String, Object> body = new LinkedHashMap<>();
        body.put("keys", keys);
        body.put("tier", tier);
        body.put("force", force);
        return call(instanceId, "DELETE", "/cache/objects", body);
    }

    /** A call to a registered instance's HTTP port from the coordinator's address, as LMCache's coordinator makes it (no token). */
    public HttpResponse<String> call(String instanceId, String method, String path, Object body) {
        Instance instance;
        synchronized (this) {
            instance = instances.get(instanceId);
        }
        if (instance == null) {
            throw new IllegalStateException("no instance " + instanceId);
        }
        try {
            HttpRequest request = HttpRequest.newBuilder(URI.create("http://" + instance.ip() + ":" + instance.httpPort() + path))
                    .header("Content-Type", "application/json").method(method, body == null ? HttpRequest.BodyPublishers.noBody()
                            : HttpRequest.BodyPublishers.ofByteArray(JSON.writeValueAsBytes(body)))
                    .timeout(Duration.ofSeconds(10)).build();
            return client.send(request, HttpResponse.BodyHandlers.ofString());
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException(e);
        }
    }

    // --- the routes ----------------------------------------------------------------------------------

    private void handle(HttpExchange exchange) throws IOException {
        try (exchange) {
            String method = exchange.getRequestMethod();
            String path = exchange.getRequestURI().getPath();
            byte[] body = exchange.getRequestBody().readAllBytes();
            log.add(method + " " + path);
            Object[] reply;
            synchronized (this) {
                String[] fault = faults.peek();
                if (fault != null && fault[0].equals(path)) {
                    faults.poll();
                    reply = new Object[] {Integer.parseInt(fault[1]), Map.of("detail", "injected")};
                } else {
                    reply = route(method, path, body);
                }
            }
            int status = (Integer) reply[0];
            byte[] out = reply[1] == null ? new byte[0] : JSON.writeValueAsBytes(reply[1]);
            exchange.getResponseHeaders().set("Content-Type", "application/json");
            exchange.sendResponseHeaders(status, out.length == 0 ? -1 : out.length);
            if (out.length > 0) {
                try (OutputStream stream = exchange.getResponseBody()) {
                    stream.write(out);
                }
            }
        }
    }

    private Object[] route(String method, String path, byte[] body) throws IOException {
        String[] parts = path.split("/");
        if (path.equals("/instances") && method.equals("POST")) {
            return register(JSON.readTree(body));
        }
        if (path.equals("/instances") && method.equals("GET")) {
            return new Object[] {200, Map.of("instances", instances.values())};
        }
        if (parts.length == 4 && parts[1].equals("instances") && parts[3].equals("heartbeat") && method.equals("PUT")) {
            if (!instances.containsKey(parts[2])) {
                return new Object[] {404, Map.of("detail", "unknown instance")};
            }
            heartbeats++;
            return new Object[] {200, Map.of("instance_id", parts[2])};
        }
        if (parts.length == 3 && parts[1].equals("instances") && method.equals("DELETE")) {
            instances.remove(parts[2]);
            return new Object[] {204, null};
        }
        if (path.equals("/events") && method.equals("POST")) {
            return events(JSON.readTree(body));
        }
        return new Object[] {404, Map.of("detail", "not found")};
    }

    private Object[] register(JsonNode body) {
        String ip = body.path("ip").asText("").strip();
        int httpPort = body.path("http_port").asInt(0);
        if (ip.isEmpty() || httpPort < 1 || httpPort > 65535 || !body.path("mq_port").canConvertToInt()) {
            return new Object[] {422, Map.of("detail", "bad registration")};
        }
        String id = body.path("instance_id").asText("");
        id = id.isBlank() ? UUID.randomUUID().toString() : id;
        boolean again = instances.containsKey(id);
        instances.put(id, new Instance(id, ip, httpPort));
        registrations++;
        return new Object[] {200, Map.of("instance_id", id, "re_registered", again)};
    }

    private Object[] events(JsonNode body) {
        JsonNode batches = body.path("batches");
        if (!batches.isArray()) {
            return new Object[] {422, Map.of("detail", "batches required")};
        }
        for (JsonNode batch : batches) {
            for (JsonNode entry : batch.path("entries")) {
                if (!validKey(entry.path("key"))) {
                    return new Object[] {422, Map.of("detail", "bad key")};
                }
            }
            if (batch.path("seq").asLong(0) < 1 || batch.path("incarnation").asLong(-1) < 0 || batch.path("instance_id").asText("").isEmpty()) {
                return new Object[] {422, Map.of("detail", "bad batch")};
            }
        }
        int applied = 0;
        int dups = 0;
        int stales = 0;
        for (JsonNode batch : batches) {
            String id = batch.path("instance_id").asText();
            long incarnation = batch.path("incarnation").asLong();
            long seq = batch.path("seq").asLong();
            long[] cursor = cursors.get(id);
            if (cursor != null && incarnation < cursor[0]) {
                stales++;
                continue;
            }
            if (cursor == null || incarnation > cursor[0]) {
                if (cursor != null) {
                    placements.removeIf(p -> p.instanceId().equals(id) && p.tier().equals("l1")); // fence L1 only
                }
                cursor = new long[] {incarnation, 0};
                cursors.put(id, cursor);
            }
            if (seq <= cursor[1]) {
                dups++;
                continue;
            }
            if (cursor[1] != 0 && seq > cursor[1] + 1) {
                gaps++;
            }
            cursor[1] = seq;
            apply(id, batch);
            admitted.add(batch);
            applied++;
        }
        duplicates += dups;
        stale += stales;
        return new Object[] {200, Map.of("applied", applied, "duplicates", dups, "stale", stales)};
    }

    private void apply(String id, JsonNode batch) {
        String tier = batch.path("tier").asText();
        String backend = batch.path("backend").asText();
        switch (batch.path("event_type").asText()) {
            case "store" -> batch.path("entries").forEach(e -> placements.add(new Placement(id, tier, backend, e.path("key"))));
            case "delete" -> batch.path("entries").forEach(e -> placements.remove(new Placement(id, tier, backend, e.path("key"))));
            case "config" -> capacities.put(id + "/" + tier + "/" + backend, batch.path("capacity_bytes").asLong());
            default -> { }
        }
    }

    private static boolean validKey(JsonNode key) {
        String salt = key.path("cache_salt").asText("");
        return key.path("chunk_hash_hex").asText("").matches("[0-9a-fA-F]+") && !key.path("model_name").asText("@").contains("@")
                && key.path("object_group_id").asInt(-1) >= 0 && salt.length() <= 128 && !salt.matches(".*[@/\\\\\\x00].*");
    }

    @Override
    public void close() {
        server.stop(0);
        client.close();
    }
}
