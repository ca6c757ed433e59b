package io.lmcache.server.http;

/** Why the server cannot serve right now, or null when it can. */
@FunctionalInterface
public interface HealthCheck {
    String unhealthyReason();
}
