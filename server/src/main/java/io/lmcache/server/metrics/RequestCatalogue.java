package io.lmcache.server.metrics;

import static io.lmcache.server.metrics.MeterSpec.counter;
import static io.lmcache.server.metrics.MeterSpec.timer;

/** The request path's series (the dispatcher and the reply queue): requests by op, their latency, what could not be decoded or answered. */
public enum RequestCatalogue implements CatalogueEntry {
    REQUESTS(counter("lmcache_mp.requests", "requests received, by operation", "op")),
    REQUESTS_INLINE(counter("lmcache_mp.requests_inline",
            "lookup-family requests answered on the socket thread (the others of their op went to the CPU pool)", "op")),
    HANDLER_ERRORS(counter("lmcache_mp.handler_errors", "handlers that threw; the client still got the failure value", "op")),
    UNSUPPORTED_OPS(counter("lmcache_mp.unsupported_ops", "requests for features this server does not provide (no reply)", "op")),
    REQUEST_LATENCY(timer("lmcache_mp.request_latency", "time from receiving a request to queueing its reply", "op")),
    BAD_REQUESTS(counter("lmcache_mp.bad_requests", "requests that could not be decoded", "reason")),
    WIRE_LIMIT_REFUSALS(counter("lmcache_mp.wire_limit_refusals",
            "requests refused because a field was longer than its wire limit (docs/wire-limits.md); also in bad_requests", "op",
            "field")),
    UNKNOWN_OPS(counter("lmcache_mp.unknown_ops", "requests whose op is not in the table (no reply)")),
    IGNORED_FRAMES(counter("lmcache_mp.ignored_frames", "payload frames beyond what the operation takes (ignored)")),
    REQUESTS_OVER_FRAME_BUDGET(counter("lmcache_mp.requests_over_frame_budget",
            "requests answered with their failure value because one of their frames did not fit the ZeroMQ frame budget")),
    REPLIES_DROPPED(counter("lmcache_mp.replies_dropped",
            "replies not sent: the peer does not read (its queue is full), the peer is gone, or the server's queue is full", "reason")),
    PEERS_DISCONNECTED(counter("lmcache_mp.peers_disconnected",
            "peers whose connection the server closed because they left more than their share of reply bytes unread"));

    private final MeterSpec spec;

    RequestCatalogue(MeterSpec spec) {
        this.spec = spec;
    }

    @Override
    public MeterSpec spec() {
        return spec;
    }
}
