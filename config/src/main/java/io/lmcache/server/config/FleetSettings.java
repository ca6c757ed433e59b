package io.lmcache.server.config;

import java.util.concurrent.TimeUnit;

/**
 * Membership in an LMCache fleet (fleet-and-operator-api.md §1.1): the coordinator this server registers with, the address it
 * advertises, the heartbeat period, and the cache-event stream.
 *
 * @param coordinatorUrl the coordinator's base URL ({@code --coordinator-url}); "" = no fleet (no thread, no connection)
 * @param advertiseIp the address the coordinator dials ({@code --coordinator-advertise-ip}); "" = this host's outbound address
 * @param heartbeatIntervalNs registration retries and heartbeats, this far apart
 * @param eventReporting stream store/delete/access/config events to {@code POST /events}
 * @param eventFlushIntervalNs how long events gather before a flush
 */
public record FleetSettings(String coordinatorUrl, String advertiseIp, long heartbeatIntervalNs, boolean eventReporting,
        long eventFlushIntervalNs) {
    public static final double DEFAULT_HEARTBEAT_SECONDS = 5;
    public static final double DEFAULT_FLUSH_SECONDS = 1;
    public static final FleetSettings OFF = new FleetSettings("", "", TimeUnit.SECONDS.toNanos(5), false, TimeUnit.SECONDS.toNanos(1));

    public boolean enabled() {
        return !coordinatorUrl.isEmpty();
    }

    /** Whether cache events are streamed: a coordinator and {@code --coordinator-event-reporting}. */
    public boolean eventsEnabled() {
        return enabled() && eventReporting;
    }
}
