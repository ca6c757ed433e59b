package io.lmcache.server.http;

import io.lmcache.server.config.ConfigLoader;
import io.lmcache.server.config.ServerConfig;
import io.lmcache.server.loop.RequestLoop;
import io.lmcache.server.metrics.ServerMetrics;
import java.io.IOException;
import java.net.InetAddress;
import java.net.UnknownHostException;
import java.util.HashMap;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.function.BiConsumer;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The server's two HTTP listeners: the API on {@code --http-port} and the metrics-only one on
 * {@code --prometheus-port}. They are bound while the server is built (a port conflict fails
 * start-up) and routed once the parts they show exist.
 */
public final class ServerHttp {
    private static final Logger LOG = LoggerFactory.getLogger(ServerHttp.class);

    private ServerHttp() {}

    /** The API listener, or null when {@code --http-port 0}; not started yet. */
    public static HttpApi bindApi(ServerConfig config) {
        return config.httpPort() == 0 ? null : bind(config.httpHost(), config.httpPort(), "the HTTP API to");
    }

    /** The metrics listener, or null when {@code --prometheus-port 0}; not started yet. */
    public static HttpApi bindPrometheus(ServerConfig config) {
        return config.prometheusPort() == 0 ? null : bind(config.httpHost(), config.prometheusPort(), "the metrics port");
    }

    private static HttpApi bind(String host, int port, String what) {
        try {
            return new HttpApi(host, port);
        } catch (IOException e) {
            throw new IllegalStateException("cannot bind " + what + " " + host + ":" + port + ": " + e.getMessage(), e);
        }
    }

    /**
     * What {@code --test-hooks} breaks on purpose: the request loop, the release thread ({@code blockNextRelease}), a REGISTER
     * ({@code blockNextRegistration}; null without the lmcache-driven transfer mode) and the host copies' completions
     * ({@code delayCompletions}: delay in ns, STOREs to fail).
     */
    public record HookTargets(RequestLoop loop, Runnable blockNextRelease, Runnable blockNextRegistration,
            CompletionDelays delayCompletions) {}

    /** Host copies complete {@code delayNs} after their reply from now on, and the next {@code failStores} STOREs fail. */
    @FunctionalInterface
    public interface CompletionDelays {
        void set(long delayNs, int failStores);
    }

    /** Routes both listeners (either may be null): the API gets every endpoint, the metrics port the core ones. */
    public static void route(HttpApi api, HttpApi prometheus, ServerView view, ServerMetrics metrics, ServerConfig config,
            HookTargets hooks, BiConsumer<HttpApi, AdminGuard> moreRoutes) {
        RequestLoop loop = hooks.loop();
        if (prometheus != null) {
            CoreRoutes.register(prometheus, view, metrics::scrape);
        }
        if (api == null) {
            return;
        }
        CoreRoutes.register(api, view, metrics::scrape);
        AdminGuard guard = new AdminGuard(config.httpAdminToken(), config.httpHost(), metrics);
        ServerRoutes.register(api, view, guard);
        QuotaRoute.register(api, view.l1Store(), guard);
        LmcacheAliasRoutes.register(api, view, view.l1Store(), guard);
        MemoryPressureRoute.register(api, view, config);
        moreRoutes.accept(api, guard);
        if (config.testHooks()) {
            // mutating like every other such route: POST, the same origin, and the admin token (or loopback without one)
            LOG.warn("TEST HOOKS ENABLED (--test-hooks): POST /test/halt-loop stops the request loop, POST /test/block-next-release"
                    + " makes the next native release hang, POST /test/block-next-registration the next REGISTER's handler, POST"
                    + " /test/fail-next-frame-allocation kills JeroMQ's I/O thread (each as"
                    + " guarded as /cache/clear: same origin, the admin token or loopback)");
            // runs on: lmcache-http-* (a virtual thread of the API listener)
            api.route("/test/halt-loop", guard.postOnly(exchange -> {
                loop.halt();
                return HttpApi.Response.json(200, Map.of("halted", true));
            }));
            // runs on: lmcache-http-*; the I/O thread picks the flag up at the next frame over 4 KiB and dies as it did on an OOM
            api.route("/test/fail-next-frame-allocation", guard.postOnly(exchange -> {
                loop.failNextFrameAllocation();
                return HttpApi.Response.json(200, Map.of("armed", true));
            }));
            // runs on: lmcache-http-*; the release thread picks the flag up
            api.route("/test/block-next-release", guard.postOnly(exchange -> {
                hooks.blockNextRelease().run();
                return HttpApi.Response.json(200, Map.of("armed", true));
            }));
            // runs on: lmcache-http-*; the next REGISTER picks the flag up (none without the lmcache-driven transfer mode)
            api.route("/test/block-next-registration", guard.postOnly(exchange -> {
                if (hooks.blockNextRegistration() == null) {
                    return HttpApi.Response.json(409, Map.of("detail", "no REGISTER to block: the lmcache_driven transfer mode is off"));
                }
                hooks.blockNextRegistration().run();
                return HttpApi.Response.json(200, Map.of("armed", true));
            }));
            // runs on: lmcache-http-*; host copies from now on complete delay_ms after their reply, the next fail_stores STOREs fail
            api.route("/test/delay-copy-completions", guard.postOnly(exchange -> {
                Map<String, Long> query = numbers(exchange.getRequestURI().getRawQuery());
                long delayMs = query.getOrDefault("delay_ms", 0L);
                int failStores = (int) Math.min(Integer.MAX_VALUE, query.getOrDefault("fail_stores", 0L));
                hooks.delayCompletions().set(TimeUnit.MILLISECONDS.toNanos(delayMs), failStores);
                return HttpApi.Response.json(200, Map.of("delay_ms", delayMs, "fail_stores", failStores));
            }));
        }
        if (!config.hasAdminToken() && !isLoopback(config.httpHost())) {
            LOG.warn("HTTP is bound to {} with no admin token: status and metrics are open to the network; the mutating"
                    + " endpoints (/cache/clear, /metrics/reset, /loglevel) accept loopback clients only, and /quota nobody, until"
                    + " you set --http-admin-token or {}", config.httpHost(), ConfigLoader.ENV_ADMIN_TOKEN);
        }
    }

    /** Starts serving on each listener that exists (null: not configured). */
    public static void start(HttpApi... listeners) {
        for (HttpApi listener : listeners) {
            if (listener != null) {
                listener.start();
            }
        }
    }

    /** {@code a=1&b=2} as numbers; anything else is skipped (a test route's parameters). */
    private static Map<String, Long> numbers(String query) {
        Map<String, Long> out = new HashMap<>();
        for (String pair : query == null ? new String[0] : query.split("&")) {
            String[] kv = pair.split("=", 2);
            if (kv.length == 2 && kv[1].matches("\\d{1,9}")) {
                out.put(kv[0], Long.parseLong(kv[1]));
            }
        }
        return out;
    }

    private static boolean isLoopback(String host) {
        try {
            return InetAddress.getByName(host).isLoopbackAddress();
        } catch (UnknownHostException e) {
            return false;
        }
    }
}
