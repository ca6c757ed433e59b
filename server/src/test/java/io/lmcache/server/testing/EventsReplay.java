package io.lmcache.server.testing;

import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * A small {@code lmcache trace replay-events} ({@code lmcache/v1/mp_coordinator/events_replay.py}, {@code CoordinatorTarget}) for the
 * tests: the records of an {@code events} trace in {@code t_wall} order (file order kept for ties); a {@code start} mark registers
 * the instance ({@code POST /instances} at the recorded ip, or loopback, and http port; none when it recorded no port), each
 * {@code events.batch} is one {@code POST /events} with {@code {"batches": [batch]}}, a {@code stop} mark deregisters. No heartbeats
 * (LMCache's default interval is 5 s; a test replays faster).
 */
public final class EventsReplay {
    private static final ObjectMapper JSON = new ObjectMapper();

    /** What one replay delivered. */
    public record Result(int starts, int batches, int stops, int skipped, List<Integer> eventStatuses) {}

    private EventsReplay() {}

    public static Result replay(TraceFile trace, String coordinatorUrl) {
        if (!"events".equals(trace.header().get("level"))) {
            throw new IllegalArgumentException("not an events trace: " + trace.header());
        }
        List<Map<String, Object>> records = new ArrayList<>(trace.records());
        records.sort((a, b) -> Double.compare((Double) a.get("t_wall"), (Double) b.get("t_wall"))); // stable: ties keep file order
        int starts = 0;
        int batches = 0;
        int stops = 0;
        int skipped = 0;
        List<Integer> statuses = new ArrayList<>();
        try (HttpClient client = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(2)).build()) {
            for (Map<String, Object> record : records) {
                Map<String, Object> args = TraceFile.args(record);
                switch (String.valueOf(record.get("qualname"))) {
                    case "events.batch" -> {
                        statuses.add(send(client, "POST", coordinatorUrl + "/events", Map.of("batches", List.of(args))));
                        batches++;
                    }
                    case "events.lifecycle" -> {
                        String phase = String.valueOf(args.get("phase"));
                        String id = String.valueOf(args.get("instance_id"));
                        if (phase.equals("start") && ((Long) args.get("http_port")) > 0) {
                            Map<String, Object> body = new LinkedHashMap<>();
                            String ip = String.valueOf(args.get("ip"));
                            body.put("ip", ip.isEmpty() ? "127.0.0.1" : ip);
                            body.put("http_port", args.get("http_port"));
                            body.put("instance_id", id);
                            body.put("mq_port", args.get("mq_port"));
                            send(client, "POST", coordinatorUrl + "/instances", body);
                            starts++;
                        } else if (phase.equals("stop")) {
                            send(client, "DELETE", coordinatorUrl + "/instances/" + id, null);
                            stops++;
                        } else {
                            skipped++;
                        }
                    }
                    default -> skipped++;
                }
            }
        }
        return new Result(starts, batches, stops, skipped, statuses);
    }

    private static int send(HttpClient client, String method, String url, Object body) {
        try {
            HttpRequest.Builder request = HttpRequest.newBuilder(URI.create(url)).timeout(Duration.ofSeconds(5));
            if (body == null) {
                request.method(method, HttpRequest.BodyPublishers.noBody());
            } else {
                request.header("Content-Type", "application/json").method(method, HttpRequest.BodyPublishers.ofByteArray(JSON.writeValueAsBytes(body)));
            }
            return client.send(request.build(), HttpResponse.BodyHandlers.discarding()).statusCode();
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException(e);
        }
    }
}
