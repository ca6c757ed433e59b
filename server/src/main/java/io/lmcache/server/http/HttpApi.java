package io.lmcache.server.http;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;
import io.lmcache.server.logging.LogText;
import io.lmcache.server.logging.RateLimitedLog;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.function.Supplier;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The HTTP frontend on {@code --http-host:--http-port} (the JDK's built-in server; JSON through
 * Jackson). Routes are registered by path; unknown paths get a JSON 404. A route reads what it needs of the request body and leaves
 * it open: the dispatcher swallows what is left, within bounds, before it answers, and closes the exchange.
 */
public final class HttpApi implements AutoCloseable {
    private static final Logger LOG = LoggerFactory.getLogger(HttpApi.class);
    static final ObjectMapper JSON = new ObjectMapper();
    /** Any client can make a route fail once per request. */
    private static final RateLimitedLog FAILED = new RateLimitedLog(LOG, "failed HTTP requests", 10);
    /** The most of an unread request body swallowed before a reply: Tomcat's {@code maxSwallowSize} default. */
    static final long MAX_SWALLOW_BYTES = 2L << 20;
    /** How long a reply waits at most for the unread body to arrive (checked between reads). */
    static final long SWALLOW_TIMEOUT_NS = 2_000_000_000L;

    /**
     * A response: status, content type and body, or a {@link Streamed} body written after the headers (a large binary answer
     * that never sits on the heap whole).
     */
    public record Response(int status, String contentType, byte[] body, Streamed streamed) {
        public Response(int status, String contentType, byte[] body) {
            this(status, contentType, body, null);
        }

        /** A response whose {@code length} bytes {@code streamed} writes; its {@link Streamed#close} runs once, sent or not. */
        public static Response streamed(int status, String contentType, Streamed streamed) {
            return new Response(status, contentType, new byte[0], streamed);
        }
        public static Response json(int status, Object value) {
            try {
                return new Response(status, "application/json", JSON.writeValueAsBytes(value));
            } catch (IOException e) {
                throw new IllegalStateException("JSON serialisation failed", e);
            }
        }

        public static Response text(int status, String contentType, String body) {
            return new Response(status, contentType, body.getBytes(StandardCharsets.UTF_8));
        }
    }

    /** A body of known length written straight to the client; {@link #close} releases what it holds (always called once). */
    public interface Streamed extends AutoCloseable {
        long length();

        void writeTo(OutputStream out) throws IOException;

        @Override
        void close();
    }

    /** Handles one request; {@code method} is upper case. */
    @FunctionalInterface
    public interface Route {
        Response handle(String method, HttpExchange exchange) throws Exception;
    }

    private final HttpServer server;
    private final ExecutorService executor = Executors.newThreadPerTaskExecutor(Thread.ofVirtual().name("lmcache-http-", 0).factory());
    private final Map<String, Route> routes = new ConcurrentHashMap<>();
    /** Routes that take a path parameter after their prefix ({@code /api/quota/}), tried when no exact path matches. */
    private final Map<String, Route> prefixRoutes = new ConcurrentHashMap<>();

    public HttpApi(String host, int port) throws IOException {
        server = HttpServer.create(new InetSocketAddress(host, port), 64);
        server.setExecutor(executor);
        // runs on: lmcache-http-* (the JDK server's dispatcher hands each exchange to the executor)
        server.createContext("/", this::dispatch);
    }

    public HttpApi route(String path, Route route) {
        routes.put(path, route);
        return this;
    }

    /** A route for every path under {@code prefix} (which ends with {@code /}); the route reads the rest of the path itself. */
    public HttpApi routeUnder(String prefix, Route route) {
        prefixRoutes.put(prefix, route);
        return this;
    }

    private Route prefixRoute(String path) {
        for (Map.Entry<String, Route> entry : prefixRoutes.entrySet()) {
            if (path.startsWith(entry.getKey()) && path.length() > entry.getKey().length()) {
                return entry.getValue();
            }
        }
        return null;
    }

    public void start() {
        server.start();
        LOG.info("HTTP API listening on http://{}:{}", server.getAddress().getHostString(), server.getAddress().getPort());
    }

    public int port() {
        return server.getAddress().getPort();
    }

    private void dispatch(HttpExchange exchange) throws IOException {
        Response response;
        String path = exchange.getRequestURI().getPath();
        Route route = routes.get(path.length() > 1 && path.endsWith("/") ? path.substring(0, path.length() - 1) : path);
        route = route != null ? route : prefixRoute(path);
        String method = exchange.getRequestMethod().toUpperCase(Locale.ROOT);
        // HEAD is GET without the body: every read-only route answers it, a POST-only route says 405
        boolean head = method.equals("HEAD");
        try {
            if (route == null) {
                response = Response.json(404, Map.of("error", "not found", "path", path));
            } else {
                response = route.handle(head ? "GET" : method, exchange);
            }
        } catch (ServerRoutes.BadRequest e) {
            response = Response.json(400, Map.of("error", e.getMessage()));
        } catch (Exception e) {
            FAILED.warn("HTTP {} {} failed", LogText.clip(exchange.getRequestMethod()), LogText.clip(path), e);
            response = Response.json(500, Map.of("error", e.getClass().getSimpleName() + ": " + e.getMessage()));
        }
        swallowUnread(exchange);
        if (response.streamed() != null) {
            sendStreamed(exchange, response, head);
            return;
        }
        try (exchange) {
            exchange.getResponseHeaders().set("Content-Type", response.contentType());
            boolean body = !head && response.body().length > 0;
            exchange.sendResponseHeaders(response.status(), body ? response.body().length : -1);
            if (body) {
                try (OutputStream out = exchange.getResponseBody()) {
                    out.write(response.body());
                }
            }
        }
    }

    /**
     * What the route left unread of the request body (a refusal from its headers or first frame), read and dropped before the
     * reply: a connection closed with request bytes still unread is reset by the kernel, and the client loses the reply already
     * sent to it (HttpApiTest: 34 of 300 refusals of 512 KiB bodies, before). A body declared longer than the bound is not waited
     * for (its client may send nothing until it has a reply) and one that goes on past the bound or the time is left: either ends
     * the connection ({@code Connection: close}). One its route closed is the JDK's to end (its close drains 64 KiB).
     */
    private static void swallowUnread(HttpExchange exchange) {
        String declared = exchange.getRequestHeaders().getFirst("Content-Length");
        if (declared != null && !fitsSwallow(declared)) {
            exchange.getResponseHeaders().set("Connection", "close");
            return;
        }
        long deadline = System.nanoTime() + SWALLOW_TIMEOUT_NS;
        try {
            InputStream body = exchange.getRequestBody();
            if (body.read() < 0) {
                return; // read whole by its route: the usual case
            }
            byte[] sink = new byte[64 * 1024];
            long swallowed = 1;
            for (int n = body.read(sink); n >= 0; n = body.read(sink)) {
                swallowed += n;
                if (swallowed > MAX_SWALLOW_BYTES || System.nanoTime() - deadline > 0) {
                    exchange.getResponseHeaders().set("Connection", "close");
                    return;
                }
            }
        } catch (IOException e) {
            // closed by its route, or broken off by the client: nothing more to read either way
        }
    }

    private static boolean fitsSwallow(String contentLength) {
        try {
            return Long.parseLong(contentLength.strip()) <= MAX_SWALLOW_BYTES;
        } catch (NumberFormatException e) {
            return false;
        }
    }

    private static void sendStreamed(HttpExchange exchange, Response response, boolean head) throws IOException {
        try (exchange; Streamed streamed = response.streamed()) {
            exchange.getResponseHeaders().set("Content-Type", response.contentType());
            boolean body = !head && streamed.length() > 0;
            exchange.sendResponseHeaders(response.status(), body ? streamed.length() : -1);
            if (body) {
                try (OutputStream out = exchange.getResponseBody()) {
                    streamed.writeTo(out);
                }
            }
        }
    }

    /** The response of a read-only route: GET (and HEAD, which the dispatcher turns into GET) only. */
    public static Response onlyGet(String method, Supplier<Response> response) {
        return method.equals("GET") ? response.get() : methodNotAllowed(method);
    }

    public static Response methodNotAllowed(String method) {
        return Response.json(405, Map.of("error", "method " + method + " not allowed"));
    }

    @Override
    public void close() {
        server.stop(0);
        executor.shutdownNow();
    }
}
