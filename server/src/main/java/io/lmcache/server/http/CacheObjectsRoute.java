package io.lmcache.server.http;

import com.fasterxml.jackson.databind.JsonNode;
import java.io.IOException;
import java.net.InetAddress;
import java.util.Map;
import java.util.function.Predicate;

/**
 * LMCache's cache-management routes the coordinator calls (fleet-and-operator-api.md §2.1; LMCache's
 * {@code mp/http_apis/cache_api.py}): {@code DELETE /cache/objects} and {@code GET /cache/objects}. LMCache guards neither; here
 * they take the admin token (a DELETE as every mutation, the listing as {@code /quota}: it names tenants' salts), except from the
 * configured coordinator's addresses, which LMCache's coordinator calls without any token.
 */
public final class CacheObjectsRoute {
    /** What the routes do; answers are LMCache's ({@code {"detail": ...}} on errors). */
    public interface Objects {
        HttpApi.Response delete(JsonNode body);

        HttpApi.Response list(Map<String, String> query);
    }

    /** Largest request body: 10 000 keys of a few hundred bytes each. */
    static final int MAX_BODY_BYTES = 8 * 1024 * 1024;

    private CacheObjectsRoute() {}

    /** {@code coordinator}: whether a peer address is the configured coordinator's (admitted without the token). */
    public static void register(HttpApi api, Objects objects, AdminGuard guard, Predicate<InetAddress> coordinator) {
        // runs on: lmcache-http-* (one virtual thread per exchange)
        api.route("/cache/objects", (method, exchange) -> {
            InetAddress peer = exchange.getRemoteAddress().getAddress();
            boolean fromCoordinator = peer != null && coordinator.test(peer) && exchange.getRequestHeaders().getFirst("Origin") == null;
            if (method.equals("GET")) {
                HttpApi.Response denied = fromCoordinator ? null : guard.checkRead(exchange);
                return denied != null ? denied : objects.list(ServerRoutes.query(exchange.getRequestURI().getRawQuery()));
            }
            if (!method.equals("DELETE")) {
                return HttpApi.methodNotAllowed(method);
            }
            HttpApi.Response denied = fromCoordinator ? null : guard.check(exchange);
            if (denied != null) {
                return denied;
            }
            byte[] bytes = exchange.getRequestBody().readNBytes(MAX_BODY_BYTES + 1);
            if (bytes.length > MAX_BODY_BYTES) {
                return HttpApi.Response.json(413, Map.of("detail", "the body is larger than " + MAX_BODY_BYTES + " bytes"));
            }
            JsonNode body;
            try {
                body = HttpApi.JSON.readTree(bytes);
            } catch (IOException e) {
                return HttpApi.Response.json(422, Map.of("detail", "the body is not JSON"));
            }
            return objects.delete(body == null ? HttpApi.JSON.createObjectNode() : body);
        });
    }
}
