package io.lmcache.server.fleet;

import com.fasterxml.jackson.core.JsonToken;
import com.sun.net.httpserver.HttpExchange;
import io.lmcache.server.http.AdminGuard;
import io.lmcache.server.http.HttpApi;
import io.lmcache.server.http.JsonBody;
import io.lmcache.server.http.JsonBody.Refused;
import io.lmcache.server.logging.LogText;
import io.lmcache.server.protocol.WireField;
import io.lmcache.server.tier.WarmPrefetches;
import java.io.IOException;
import java.net.InetAddress;
import java.nio.charset.StandardCharsets;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.concurrent.Semaphore;
import java.util.concurrent.atomic.LongAdder;
import java.util.function.Predicate;

/**
 * LMCache's warm prefetch routes (fleet-and-operator-api.md §2.2; LMCache {@code mp/http_apis/cache_api.py},
 * {@code mp/cache_control/prefetch_service.py}@45841c53): {@code POST /cache/prefetches} resolves a token sequence's keys and
 * queues their load from L2 into L1 (202), {@code GET /cache/prefetches/{request_id}} answers pending, or completed once (then
 * 404). The completed reply carries {@code missing_key_indices} for LMCache's moves (§2.6, OPEN-PR #5089). Errors are LMCache's
 * ({@code {"detail": ...}}: 400 invalid, 422 a body that does not fit the schema, 404 unknown id, 503 no layout or no L2). Both
 * take the admin token, except from the configured coordinator's addresses, as {@code /cache/objects}.
 */
final class WarmPrefetchRoute {
    /** LMCache's {@code MAX_TOKEN_IDS} for token-addressed cache-control requests ({@code key_resolver.py}@1441f134). */
    static final int MAX_TOKEN_IDS = 1_000_000;
    /** A body of {@link #MAX_TOKEN_IDS} ids of up to 11 characters each, with room for the other fields. */
    static final int MAX_BODY_BYTES = 16 << 20;
    /** Submissions parsed at once: each may hold a body and its token array on the heap. */
    static final int MAX_CONCURRENT = 2;
    private static final int MAX_SALT_CHARS = EncodedKey.MAX_SALT_CHARS;
    /** LMCache's {@code key_resolver.py} answers a longer list with its InvalidRequest: 400. */
    private static final JsonBody.IntList TOKEN_IDS = new JsonBody.IntList(MAX_TOKEN_IDS, 400,
            "too many token_ids in a single request (limit=" + MAX_TOKEN_IDS + ")");

    /** A parsed submission. */
    private record Body(String model, int worldSize, int[] tokens, String salt) {}

    /** Outcomes of submissions and polls, by the counter's label. */
    final LongAdder submitted = new LongAdder();
    final LongAdder noop = new LongAdder();
    final LongAdder refused = new LongAdder();
    final LongAdder full = new LongAdder();
    private final WarmPrefetches warm;
    private final Semaphore concurrent = new Semaphore(MAX_CONCURRENT);

    /** {@code warm}: null without L2 (every submission is then LMCache's 503). */
    WarmPrefetchRoute(WarmPrefetches warm) {
        this.warm = warm;
    }

    void register(HttpApi api, AdminGuard guard, Predicate<InetAddress> coordinator) {
        // runs on: lmcache-http-* (one virtual thread per exchange)
        api.route("/cache/prefetches", (method, exchange) -> {
            if (!method.equals("POST")) {
                return HttpApi.methodNotAllowed(method);
            }
            HttpApi.Response denied = fromCoordinator(exchange, coordinator) ? null : guard.check(exchange);
            return denied != null ? closing(exchange, denied) : submit(exchange);
        });
        api.routeUnder("/cache/prefetches/", (method, exchange) -> {
            if (!method.equals("GET")) {
                return HttpApi.methodNotAllowed(method);
            }
            HttpApi.Response denied = fromCoordinator(exchange, coordinator) ? null : guard.checkRead(exchange);
            if (denied != null) {
                return denied;
            }
            return poll(exchange.getRequestURI().getRawPath().substring("/cache/prefetches/".length()));
        });
    }

    private static boolean fromCoordinator(HttpExchange exchange, Predicate<InetAddress> coordinator) {
        InetAddress peer = exchange.getRemoteAddress().getAddress();
        return peer != null && coordinator.test(peer) && exchange.getRequestHeaders().getFirst("Origin") == null;
    }

    /** A refusal whose body may be unread ends the connection (the rest of a large body would meet the next request). */
    private static HttpApi.Response closing(HttpExchange exchange, HttpApi.Response response) {
        exchange.getResponseHeaders().set("Connection", "close");
        return response;
    }

    private HttpApi.Response submit(HttpExchange exchange) {
        try {
            concurrent.acquire();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return closing(exchange, detail(503, "shutting down"));
        }
        try {
            Body body = parse(exchange);
            if (warm == null) {
                throw new Refused(503, "no L2 adapter is configured: nothing to prefetch from");
            }
            return switch (warm.submit(body.model(), body.worldSize(), body.tokens(), body.salt())) {
                case WarmPrefetches.Submitted.Accepted a -> {
                    submitted.increment();
                    Map<String, Object> out = new LinkedHashMap<>();
                    out.put("request_id", a.requestId());
                    out.put("chunks", a.chunks());
                    out.put("status", "submitted");
                    yield HttpApi.Response.json(202, out);
                }
                case WarmPrefetches.Submitted.Noop n -> {
                    noop.increment();
                    Map<String, Object> out = new LinkedHashMap<>();
                    out.put("chunks", 0);
                    out.put("status", "noop");
                    yield HttpApi.Response.json(202, out);
                }
                case WarmPrefetches.Submitted.NoLayout n -> throw new Refused(503, "no layout registered for model_name="
                        + LogText.clip(body.model()) + " world_size=" + body.worldSize() + "; the model has not allocated KV cache on this node yet");
                case WarmPrefetches.Submitted.TooManyKeys t -> throw new Refused(400, "the tokens resolve to " + t.keys() + " keys, more than "
                        + WarmPrefetches.MAX_KEYS_PER_JOB + " in one prefetch");
                case WarmPrefetches.Submitted.Full f -> {
                    full.increment();
                    yield detail(503, WarmPrefetches.MAX_JOBS + " prefetches are held already; poll them or retry later");
                }
            };
        } catch (Refused e) {
            refused.increment();
            return closing(exchange, detail(e.status(), e.getMessage()));
        } catch (IOException e) {
            refused.increment();
            return closing(exchange, detail(400, "the body could not be read"));
        } finally {
            concurrent.release();
        }
    }

    private HttpApi.Response poll(String requestId) {
        if (warm == null || requestId.isEmpty() || requestId.length() > 64) {
            return unknown(requestId);
        }
        return switch (warm.poll(requestId)) {
            case WarmPrefetches.Status.Pending p -> {
                Map<String, Object> out = new LinkedHashMap<>();
                out.put("request_id", requestId);
                out.put("status", "pending");
                yield HttpApi.Response.json(200, out);
            }
            case WarmPrefetches.Status.Completed c -> {
                Map<String, Object> out = new LinkedHashMap<>();
                out.put("request_id", requestId);
                out.put("status", "completed");
                out.put("found_keys", c.foundKeys());
                out.put("total_keys", c.totalKeys());
                out.put("missing_key_indices", c.missing());
                yield HttpApi.Response.json(200, out);
            }
            case WarmPrefetches.Status.Unknown u -> unknown(requestId);
        };
    }

    private static HttpApi.Response unknown(String requestId) {
        return detail(404, "unknown prefetch request_id='" + LogText.clip(requestId) + "' (already completed or never submitted)");
    }

    /**
     * LMCache's schema: {@code model_name} (str), {@code world_size} (int >= 1), {@code token_ids} ([int]), {@code cache_salt}
     * (str, ""), {@code source_tier} ("l2"), {@code target_tier} ("l1"), {@code tags} (object); a field of the wrong type is 422,
     * a value the service refuses 400. The token list is read straight into an int array, never a tree of nodes.
     */
    private static Body parse(HttpExchange exchange) throws Refused, IOException {
        return JsonBody.read(JsonBody.bounded(exchange.getRequestBody(), MAX_BODY_BYTES), WarmPrefetchRoute::body);
    }

    private static Body body(JsonBody.Reader body) throws Refused, IOException {
        String model = null;
        String salt = "";
        String source = "l2";
        String target = "l1";
        int[] tokens = null;
        long worldSize = -1;
        while (body.nextField()) {
            switch (body.field()) {
                case "model_name" -> model = body.text();
                case "cache_salt" -> salt = body.text();
                case "source_tier" -> source = body.text();
                case "target_tier" -> target = body.text();
                case "world_size" -> worldSize = body.integer("an integer >= 1");
                case "token_ids" -> tokens = body.ints(TOKEN_IDS);
                case "tags" -> tags(body);
                default -> body.skip();
            }
        }
        if (model == null || tokens == null || worldSize < 0) {
            throw new Refused(422, "the body must have model_name (str), world_size (int >= 1) and token_ids ([int])");
        }
        check(model, worldSize, salt, source, target);
        return new Body(model, (int) worldSize, tokens, salt);
    }

    /** The service's own checks (LMCache's InvalidRequest: 400), after the schema's. */
    private static void check(String model, long worldSize, String salt, String source, String target) throws Refused {
        for (String tier : new String[] {source, target}) {
            if (!tier.equals("l1") && !tier.equals("l2") && !tier.equals("all")) {
                throw new Refused(422, "a tier is one of l1, l2, all; got '" + LogText.clip(tier) + "'");
            }
        }
        if (!source.equals("l2") || !target.equals("l1")) {
            throw new Refused(400, "unsupported prefetch direction '" + source + "'->'" + target + "'; only 'l2'->'l1'");
        }
        if (model.isEmpty() || model.contains("@") || model.getBytes(StandardCharsets.UTF_8).length > WireField.MODEL_NAME.max()) {
            throw new Refused(400, "model_name must be a non-empty string without '@' of at most " + WireField.MODEL_NAME.max() + " bytes");
        }
        if (worldSize < 1) {
            throw new Refused(422, "world_size must be >= 1");
        }
        if (salt.codePointCount(0, salt.length()) > MAX_SALT_CHARS || salt.getBytes(StandardCharsets.UTF_8).length > WireField.CACHE_SALT.max()
                || salt.chars().anyMatch(c -> c == '@' || c == '/' || c == '\\' || c == 0)) {
            throw new Refused(400, "cache_salt must have at most " + MAX_SALT_CHARS + " characters and none of @ / \\ NUL");
        }
    }

    /** LMCache's L2 adapters here keep no tags: a tagged prefetch is refused (§2.0), an empty object is none. */
    private static void tags(JsonBody.Reader body) throws Refused, IOException {
        if (body.value() == JsonToken.VALUE_NULL) {
            return;
        }
        if (body.value() != JsonToken.START_OBJECT) {
            throw new Refused(422, "tags must be an object");
        }
        if (body.nextToken() != JsonToken.END_OBJECT) {
            throw new Refused(400, "tags are not supported for L2 operations: no L2 adapter here keeps them");
        }
    }

    private static HttpApi.Response detail(int status, String message) {
        return HttpApi.Response.json(status, Map.of("detail", message));
    }
}
