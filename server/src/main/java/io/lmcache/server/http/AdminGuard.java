package io.lmcache.server.http;

import com.sun.net.httpserver.HttpExchange;
import java.net.InetAddress;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.util.Map;

/**
 * Who may call the mutating endpoints: with a token configured, anyone presenting
 * {@code Authorization: Bearer <token>}; without one, loopback clients only (a sidecar's own pod or
 * host), so a server bound to 0.0.0.0 is never open to the network by default.
 */
public final class AdminGuard {
    private final byte[] token;

    public AdminGuard(String token) {
        this.token = token.getBytes(StandardCharsets.UTF_8);
    }

    /** Null when allowed; else the response to send. */
    public HttpApi.Response check(HttpExchange exchange) {
        if (token.length > 0) {
            String header = exchange.getRequestHeaders().getFirst("Authorization");
            byte[] presented = header != null && header.startsWith("Bearer ")
                    ? header.substring(7).strip().getBytes(StandardCharsets.UTF_8) : new byte[0];
            if (!MessageDigest.isEqual(token, presented)) {
                return HttpApi.Response.json(401, Map.of("error", "this endpoint needs Authorization: Bearer <admin token>"));
            }
            return null;
        }
        InetAddress remote = exchange.getRemoteAddress().getAddress();
        if (remote == null || !remote.isLoopbackAddress()) {
            return HttpApi.Response.json(403, Map.of("error", "no admin token is configured (--http-admin-token): mutating endpoints"
                    + " accept loopback clients only"));
        }
        return null;
    }
}
