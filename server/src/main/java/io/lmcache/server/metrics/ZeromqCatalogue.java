package io.lmcache.server.metrics;

import static io.lmcache.server.metrics.MeterSpec.counter;
import static io.lmcache.server.metrics.MeterSpec.gauge;

/** The ZeroMQ transport's series: the connection limits (issue 31), the frame budget, JeroMQ's I/O thread. */
public enum ZeromqCatalogue implements CatalogueEntry {
    CONNECTIONS_REFUSED(counter("lmcache_mp.zeromq_connections_refused",
            "ZeroMQ connections closed as they were accepted: over --max-connections, or no descriptor left", "reason")),
    CONNECTIONS_OPEN(gauge("lmcache_mp.zeromq_connections_open", "ZeroMQ TCP connections open (the health probe's included)")),
    ACCEPT_FAILURES(counter("lmcache_mp.zeromq_accept_failures", "accept() calls of the ZeroMQ listener that failed")),
    CONNECTIONS_CLOSED(counter("lmcache_mp.zeromq_connections_closed", "ZeroMQ connections the server closed", "reason")),
    FRAMES_ABANDONED(counter("lmcache_mp.zeromq_frames_abandoned",
            "long frames given back unfinished or unread: their connection closed (or was closed for stalling) mid-frame")),
    MESSAGES_CUT(counter("lmcache_mp.zeromq_messages_cut",
            "messages ended by the server at " + ZeromqCatalogue.MAX_PARTS + " frames (a peer that never sends a last frame)")),
    FRAMES_OVER_BUDGET(counter("lmcache_mp.zeromq_frames_over_budget",
            "frames over the ZeroMQ frame budget (many connections mid-way through long frames): their requests get their failure value")),
    FRAME_BYTES_HELD(gauge("lmcache_mp.zeromq_frame_bytes_held", "bytes of long frames received and not yet copied by the request loop")),
    IO_THREAD_DEATHS(counter("lmcache_mp.zeromq_io_thread_deaths", "JeroMQ I/O threads that died (the ROUTER stops serving)")),
    IO_ERRORS(counter("lmcache_mp.zeromq_io_errors", "exceptions JeroMQ's I/O thread survived"));

    /** loop.PartLimit.MAX_PARTS (a test holds the two equal): the catalogue names no server package. */
    static final int MAX_PARTS = 63;
    private final MeterSpec spec;

    ZeromqCatalogue(MeterSpec spec) {
        this.spec = spec;
    }

    @Override
    public MeterSpec spec() {
        return spec;
    }
}
