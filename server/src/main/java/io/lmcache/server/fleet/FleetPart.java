package io.lmcache.server.fleet;

import io.lmcache.server.config.FleetSettings;
import io.lmcache.server.config.ServerConfig;
import io.lmcache.server.http.AdminGuard;
import io.lmcache.server.http.CacheObjectsRoute;
import io.lmcache.server.http.HttpApi;
import io.lmcache.server.l2.L2Adapter;
import io.lmcache.server.logging.LogText;
import io.lmcache.server.metrics.FleetCatalogue;
import io.lmcache.server.metrics.ServerMetrics;
import io.lmcache.server.storage.ObjectStore;
import io.lmcache.server.tier.WarmPrefetches;
import java.net.InetAddress;
import java.net.URI;
import java.net.UnknownHostException;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.concurrent.atomic.AtomicLong;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The fleet's part of the server (one Part once the assembly of issue 46 lands): built after the stores, it chains the event feed
 * into them, routes {@code /cache/objects} (always: the routes are LMCache's, with or without a coordinator), and with
 * {@code --coordinator-url} starts the membership and event threads once the server serves (the event thread also without one when
 * the events trace records the stream). Closed before the stores: the last
 * events are flushed, then the server deregisters.
 */
public final class FleetPart implements AutoCloseable {
    private static final Logger LOG = LoggerFactory.getLogger(FleetPart.class);
    /** Incarnations handed out in this JVM: a second start in the same millisecond still gets a higher one. */
    private static final AtomicLong LAST_INCARNATION = new AtomicLong();

    private final FleetSettings settings;
    private final ObjectStore store;
    private final List<L2Adapter> adapters;
    private final CoordinatorHttp http;
    private final CacheEventStream events;
    private final Membership membership;
    private final Set<InetAddress> coordinatorAddresses;
    private final WarmPrefetchRoute prefetches;

    private FleetPart(ServerConfig config, ObjectStore store, List<L2Adapter> adapters, BatchRecorder recorder, WarmPrefetches warm) {
        this.settings = config.fleet();
        this.store = store;
        this.adapters = List.copyOf(adapters);
        this.prefetches = new WarmPrefetchRoute(warm);
        long incarnation = settings.enabled() || recorder != null ? incarnation() : 0;
        http = settings.enabled() ? new CoordinatorHttp(settings.coordinatorUrl()) : null;
        // the stream runs for the coordinator (--coordinator-event-reporting) and for the events trace, either or both (LMCache's
        // maybe_create_cache_event_subscriber): the trace needs no coordinator
        events = settings.eventsEnabled() || recorder != null ? new CacheEventStream(settings.eventsEnabled() ? http : null,
                config.instanceId(), incarnation, settings.eventFlushIntervalNs(), () -> capacities(config, this.adapters), recorder) : null;
        if (events != null) {
            StoreFeed.attach(events, store, this.adapters);
        }
        if (recorder != null) {
            // mq_port 0: no P2P here; ip as configured ("" = the outbound address), as LMCache's start mark
            recorder.started(new BatchRecorder.Emitter(config.instanceId(), incarnation, settings.advertiseIp(), config.httpPort(), 0));
        }
        if (!settings.enabled()) {
            membership = null;
            coordinatorAddresses = Set.of();
            return;
        }
        coordinatorAddresses = resolve(settings.coordinatorUrl());
        Membership.Advertised advertised = new Membership.Advertised(Membership.advertiseIp(settings.advertiseIp(),
                settings.coordinatorUrl()), config.httpPort());
        membership = new Membership(http, config.instanceId(), advertised, settings.heartbeatIntervalNs(),
                events == null ? () -> { } : events::declareCapacity);
        LOG.info("fleet: coordinator {}, advertising {}:{}, incarnation {}, cache events {}", LogText.clip(settings.coordinatorUrl()),
                LogText.clip(advertised.ip()), advertised.httpPort(), incarnation, settings.eventsEnabled() ? "on" : "off");
    }

    /** Builds the part; with a coordinator the event feed is chained into the stores now (before the first STORE). */
    public static FleetPart open(ServerConfig config, ObjectStore store, List<L2Adapter> adapters) {
        return new FleetPart(config, store, adapters, null, null);
    }

    /** As {@link #open(ServerConfig, ObjectStore, List)}, the stamped batches also going to {@code recorder} (null: none). */
    public static FleetPart open(ServerConfig config, ObjectStore store, List<L2Adapter> adapters, BatchRecorder recorder) {
        return new FleetPart(config, store, adapters, recorder, null);
    }

    /** As {@link #open(ServerConfig, ObjectStore, List, BatchRecorder)}, with the L2 tier's warm prefetches ({@code warm}, null without L2). */
    public static FleetPart open(ServerConfig config, ObjectStore store, List<L2Adapter> adapters, BatchRecorder recorder, WarmPrefetches warm) {
        return new FleetPart(config, store, adapters, recorder, warm);
    }

    /**
     * LMCache's {@code int(time.time())} (cache_events.py) gives two starts within one second the same incarnation, and the
     * coordinator then drops the second process's batches as duplicates; epoch milliseconds, strictly rising within a JVM, keep
     * the ordering the coordinator compares (as integers only: ingest.md) and tell such starts apart [uncertain in the spec].
     */
    static long incarnation() {
        long now = System.currentTimeMillis();
        return LAST_INCARNATION.updateAndGet(last -> Math.max(last + 1, now));
    }

    /** The compartments to declare: L1 per medium with its configured size, each L2 adapter with its capacity (0: none). */
    private static List<CacheEventStream.Capacity> capacities(ServerConfig config, List<L2Adapter> adapters) {
        List<CacheEventStream.Capacity> out = new ArrayList<>();
        out.add(new CacheEventStream.Capacity(CacheEventSink.Place.L1_DRAM, config.l1SizeBytes()));
        for (L2Adapter adapter : adapters) {
            long capacity;
            try {
                capacity = Math.max(0, adapter.usage().totalCapacityBytes());
            } catch (RuntimeException e) {
                capacity = 0;
            }
            out.add(new CacheEventStream.Capacity(new CacheEventSink.Place("l2", adapter.typeName(), false), capacity));
        }
        return out;
    }

    /** The coordinator's addresses, resolved once at start: the peers admitted to the cache control without the admin token. */
    private static Set<InetAddress> resolve(String url) {
        String host = URI.create(url).getHost();
        try {
            return Set.of(InetAddress.getAllByName(host.startsWith("[") ? host.substring(1, host.length() - 1) : host));
        } catch (UnknownHostException e) {
            LOG.warn("cannot resolve the coordinator's host {}: its calls need the admin token until a restart resolves it",
                    LogText.clip(host));
            return Set.of();
        }
    }

    /** Whether a peer is the configured coordinator. */
    public boolean isCoordinator(InetAddress peer) {
        return coordinatorAddresses.contains(peer);
    }

    /** The routes the coordinator calls, on the API listener. */
    public void route(HttpApi api, AdminGuard guard) {
        CacheObjectsRoute.register(api, new ObjectControl(store, adapters), guard, this::isCoordinator);
        prefetches.register(api, guard, this::isCoordinator);
    }

    /** Binds the series (a fleet without a coordinator has only the warm prefetches'). */
    public void bindMetrics(ServerMetrics metrics) {
        metrics.functionCounter(FleetCatalogue.WARM_PREFETCHES, prefetches, r -> r.submitted.sum(), "submitted");
        metrics.functionCounter(FleetCatalogue.WARM_PREFETCHES, prefetches, r -> r.noop.sum(), "noop");
        metrics.functionCounter(FleetCatalogue.WARM_PREFETCHES, prefetches, r -> r.refused.sum(), "refused");
        metrics.functionCounter(FleetCatalogue.WARM_PREFETCHES, prefetches, r -> r.full.sum(), "full");
        if (membership != null) {
            metrics.functionCounter(FleetCatalogue.REGISTRATIONS, membership, m -> m.registrations.sum());
            metrics.functionCounter(FleetCatalogue.HEARTBEATS, membership, m -> m.heartbeats.sum());
            metrics.functionCounter(FleetCatalogue.FAILURES, membership, m -> m.failures.sum());
            metrics.functionCounter(FleetCatalogue.FORGOTTEN, membership, m -> m.forgotten.sum());
        }
        if (events != null) {
            metrics.functionCounter(FleetCatalogue.EVENTS_DROPPED, events, e -> e.busOverflow.sum(), "bus_overflow");
            metrics.functionCounter(FleetCatalogue.EVENTS_DROPPED, events, e -> e.spoolOverflow.sum(), "spool_overflow");
            metrics.functionCounter(FleetCatalogue.EVENTS_DROPPED, events, e -> e.rejected.sum(), "rejected");
            metrics.functionCounter(FleetCatalogue.PUBLISH_RETRIES, events, e -> e.retries.sum());
            metrics.functionCounter(FleetCatalogue.BATCHES_POSTED, events, e -> e.batchesPosted.sum());
            metrics.gauge(FleetCatalogue.SPOOL_DEPTH, events::spoolDepth);
        }
    }

    /** Starts the threads once the server serves (the coordinator may call back at once). */
    public void start() {
        if (events != null) {
            events.start();
        }
        if (membership != null) {
            membership.start();
        }
    }

    /** The last events first, then the deregistration (LMCache's order: final flush, then {@code DELETE /instances/{id}}). */
    @Override
    public void close() {
        if (events != null) {
            events.close();
        }
        if (membership != null) {
            membership.close();
        }
        if (http != null) {
            http.close();
        }
    }
}
