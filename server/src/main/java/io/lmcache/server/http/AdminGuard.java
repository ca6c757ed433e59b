package io.lmcache.server.http;

import com.sun.net.httpserver.HttpExchange;
import io.lmcache.server.logging.LogText;
import io.lmcache.server.logging.RateLimitedLog;
import io.lmcache.server.metrics.ServerCatalogue;
import io.lmcache.server.metrics.ServerMetrics;
import java.io.IOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.URI;
import java.net.URISyntaxException;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.util.Locale;
import java.util.Map;
import org.slf4j.LoggerFactory;

/**
 * Who may call the mutating endpoints ({@code POST} only) and the admin-only reads ({@code GET /quota}). First the
 * {@code Host} header of a request without the admin token: absent, or naming this server as an address literal,
 * {@code localhost}, the configured {@code --http-host} or this machine's name (else 421): a page on another site
 * that a DNS-rebinding attack points at 127.0.0.1 sends its own name there. A request presenting the token may name
 * the server any way (a Kubernetes service name): a rebinding page cannot know the token. Every mutating request must
 * then be JSON ({@code Content-Type: application/json},
 * else 415) and must not come from another origin (an {@code Origin} header naming anything but this server's own
 * host:port, else 403): a browser on the host can send neither without the page being this server's, so a web page
 * cannot clear the cache through a loopback-trusting endpoint (CSRF). Then, with a token configured, anyone presenting
 * {@code Authorization: Bearer <token>}; without one, loopback clients only (a sidecar's own pod or host), so a server
 * bound to 0.0.0.0 is never open to the network by default. The tenant routes ({@code /quota}: the salts are tenants'
 * secrets, a quota another tenant's share) take the token only, also from loopback.
 */
public final class AdminGuard {
    private static final RateLimitedLog LINES = new RateLimitedLog(LoggerFactory.getLogger(AdminGuard.class), "refused HTTP mutations", 10);

    private final byte[] token;
    private final String httpHost;
    private final ServerMetrics metrics;

    /** {@code httpHost}: the configured {@code --http-host}, one of the names an Origin may use for this server. */
    public AdminGuard(String token, String httpHost, ServerMetrics metrics) {
        this.token = token.getBytes(StandardCharsets.UTF_8);
        this.httpHost = httpHost;
        this.metrics = metrics;
        for (String reason : new String[] {"cross_origin", "not_json", "unauthorized", "not_loopback", "wrong_host", "no_token"}) {
            metrics.declare(ServerCatalogue.HTTP_REFUSED, reason);
        }
    }

    /** One mutating action: runs only once the request passed {@link #check}. */
    @FunctionalInterface
    public interface Mutation {
        HttpApi.Response apply(HttpExchange exchange) throws Exception;
    }

    /** A route that takes POST only (else 405) and runs {@code mutation} only when {@link #check} allows the request. */
    public HttpApi.Route postOnly(Mutation mutation) {
        return (method, exchange) -> {
            if (!method.equals("POST")) {
                return HttpApi.methodNotAllowed(method);
            }
            HttpApi.Response denied = check(exchange);
            return denied != null ? denied : mutation.apply(exchange);
        };
    }

    /** Null when allowed; else the response to send (counted by reason). */
    public HttpApi.Response check(HttpExchange exchange) {
        return check(exchange, false);
    }

    /**
     * {@link #check} for a route only the admin token opens ({@code tokenOnly}: no loopback trust; with no token configured
     * it is refused to everyone).
     */
    public HttpApi.Response check(HttpExchange exchange, boolean tokenOnly) {
        HttpApi.Response wrongHost = presentsToken(exchange) ? null : checkHost(exchange);
        if (wrongHost != null) {
            return wrongHost;
        }
        String origin = exchange.getRequestHeaders().getFirst("Origin");
        if (origin != null && !isOwnOrigin(origin, exchange.getLocalAddress())) {
            return refuse(exchange, "cross_origin", 403, "cross-origin request refused (Origin " + LogText.clip(origin) + ")");
        }
        String contentType = exchange.getRequestHeaders().getFirst("Content-Type");
        // a bare `curl -X POST` (no Origin, no Content-Type, no body) is no browser's: a browser's POST always sends Origin
        boolean bare = origin == null && contentType == null && !hasBody(exchange);
        if (!bare && !isJson(contentType)) {
            return refuse(exchange, "not_json", 415, "mutating endpoints take Content-Type: application/json");
        }
        return checkToken(exchange, tokenOnly);
    }

    /**
     * {@link #check} for a mutation whose body is not JSON (the HTTP KV bytes API's {@code application/x-lmcache-kv}): the same
     * Host, Origin and token rules; a browser cannot send such a body without a preflight, which the Origin rule refuses.
     */
    public HttpApi.Response checkBinary(HttpExchange exchange) {
        HttpApi.Response wrongHost = presentsToken(exchange) ? null : checkHost(exchange);
        if (wrongHost != null) {
            return wrongHost;
        }
        String origin = exchange.getRequestHeaders().getFirst("Origin");
        if (origin != null && !isOwnOrigin(origin, exchange.getLocalAddress())) {
            return refuse(exchange, "cross_origin", 403, "cross-origin request refused (Origin " + LogText.clip(origin) + ")");
        }
        return checkToken(exchange, false);
    }

    /** An admin-only read ({@code GET}): the right {@code Host} and the admin token, also from loopback. Null when allowed. */
    public HttpApi.Response checkRead(HttpExchange exchange) {
        HttpApi.Response wrongHost = presentsToken(exchange) ? null : checkHost(exchange);
        return wrongHost != null ? wrongHost : checkToken(exchange, true);
    }

    /** Whether a token is configured and the request presents it (compared in constant time). */
    private boolean presentsToken(HttpExchange exchange) {
        if (token.length == 0) {
            return false;
        }
        String header = exchange.getRequestHeaders().getFirst("Authorization");
        byte[] presented = header != null && header.startsWith("Bearer ")
                ? header.substring(7).strip().getBytes(StandardCharsets.UTF_8) : new byte[0];
        return MessageDigest.isEqual(token, presented);
    }

    private HttpApi.Response checkToken(HttpExchange exchange, boolean tokenOnly) {
        if (token.length > 0) {
            if (!presentsToken(exchange)) {
                return refuse(exchange, "unauthorized", 401, "this endpoint needs Authorization: Bearer <admin token>");
            }
            return null;
        }
        if (tokenOnly) {
            return refuse(exchange, "no_token", 403, "this endpoint shows or sets tenants' quotas: it needs an admin token"
                    + " (--http-admin-token or LMCACHE_HTTP_ADMIN_TOKEN), also on loopback");
        }
        InetAddress remote = exchange.getRemoteAddress().getAddress();
        if (remote == null || !remote.isLoopbackAddress()) {
            return refuse(exchange, "not_loopback", 403, "no admin token is configured (--http-admin-token): mutating endpoints"
                    + " accept loopback clients only");
        }
        return null;
    }

    /** Null when the {@code Host} header is absent or names this server (see the class comment); else a 421. */
    private HttpApi.Response checkHost(HttpExchange exchange) {
        String host = exchange.getRequestHeaders().getFirst("Host");
        if (host == null || isOwnHost(host)) {
            return null;
        }
        return refuse(exchange, "wrong_host", 421, "the Host header must name this server (an address, localhost, or --http-host),"
                + " got " + LogText.clip(host));
    }

    boolean isOwnHost(String header) {
        String host = header.strip().toLowerCase(Locale.ROOT);
        if (host.startsWith("[")) {
            int close = host.indexOf(']');
            if (close < 0 || (close + 1 < host.length() && !isPort(host.substring(close + 1)))) {
                return false;
            }
            return isAddressLiteral(host.substring(1, close));
        }
        int colon = host.indexOf(':');
        if (colon >= 0) {
            if (!isPort(host.substring(colon))) {
                return false;
            }
            host = host.substring(0, colon);
        }
        if (host.endsWith(".")) {
            host = host.substring(0, host.length() - 1);
        }
        return host.equals("localhost") || host.equals(httpHost.toLowerCase(Locale.ROOT)) || host.equals(MachineName.VALUE)
                || host.matches("[0-9.]+") && isAddressLiteral(host);
    }

    private static boolean isPort(String colonAndPort) {
        return colonAndPort.matches(":[0-9]{1,5}");
    }

    /** Whether {@code text} is an IP address as written (no name lookup ever happens here). */
    private static boolean isAddressLiteral(String text) {
        try {
            InetAddress.ofLiteral(text);
            return true;
        } catch (IllegalArgumentException e) {
            return false;
        }
    }

    /** This machine's own name, read once (a lookup of the local host, not of any name a client sent). */
    private static final class MachineName {
        static final String VALUE = read();

        private static String read() {
            try {
                return InetAddress.getLocalHost().getHostName().toLowerCase(Locale.ROOT);
            } catch (IOException | RuntimeException e) {
                return "localhost";
            }
        }
    }

    private HttpApi.Response refuse(HttpExchange exchange, String reason, int status, String error) {
        metrics.increment(ServerCatalogue.HTTP_REFUSED, reason);
        LINES.warn("HTTP {} {} from {} refused ({}): {}", LogText.clip(exchange.getRequestMethod()),
                LogText.clip(exchange.getRequestURI().getPath()), exchange.getRemoteAddress(), status, error);
        return HttpApi.Response.json(status, Map.of("error", error));
    }

    private static boolean hasBody(HttpExchange exchange) {
        String length = exchange.getRequestHeaders().getFirst("Content-Length");
        return exchange.getRequestHeaders().containsKey("Transfer-Encoding") || length != null && !length.strip().equals("0");
    }

    /** {@code application/json}, with or without parameters (charset). */
    static boolean isJson(String contentType) {
        if (contentType == null) {
            return false;
        }
        int semicolon = contentType.indexOf(';');
        String type = (semicolon < 0 ? contentType : contentType.substring(0, semicolon)).strip().toLowerCase(Locale.ROOT);
        return type.equals("application/json");
    }

    /**
     * Whether {@code origin} names this listener: http, its port, and as host the address it
     * listens on, the configured --http-host, or (on loopback) localhost. Never the request's Host
     * header, which a DNS-rebinding page controls.
     */
    private boolean isOwnOrigin(String origin, InetSocketAddress local) {
        URI uri;
        try {
            uri = new URI(origin.strip());
        } catch (URISyntaxException e) {
            return false;
        }
        if (!"http".equalsIgnoreCase(uri.getScheme()) || uri.getHost() == null) {
            return false;
        }
        int port = uri.getPort() < 0 ? 80 : uri.getPort();
        if (port != local.getPort()) {
            return false;
        }
        String host = uri.getHost().toLowerCase(Locale.ROOT);
        if (host.startsWith("[") && host.endsWith("]")) {
            host = host.substring(1, host.length() - 1);
        }
        InetAddress address = local.getAddress();
        if (host.equals(httpHost.toLowerCase(Locale.ROOT)) || host.equals(address.getHostAddress().toLowerCase(Locale.ROOT))) {
            return true;
        }
        if (address.isLoopbackAddress()) {
            return host.equals("localhost") || host.equals("127.0.0.1") || host.equals("::1") || host.equals("0:0:0:0:0:0:0:1");
        }
        return false;
    }
}
