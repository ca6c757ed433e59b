package io.lmcache.server.liveness;

import io.lmcache.server.peer.PeerId;
import java.util.List;

/**
 * What every module that holds per-worker state implements, so the reaper can free a dead
 * worker's state (CUDA IPC mappings, shared-memory mappings, reservations) exactly as UNREGISTER
 * would. Every method is a no-op by default. Implementations keep their liveness entries and
 * their state behind one leaf lock, never held across a release.
 */
public interface InstanceLivenessTarget {
    /** The module's name, for logs. */
    String livenessName();

    /** A PING from the instance: refresh it and mark it as a worker that heartbeats. Never inserts. */
    default void touchInstance(long instanceId, PeerId peer) {
    }

    /**
     * Collects and removes (under the lock) the instances that are stale: pinged and silent for
     * {@code timeoutNs}, never pinged and silent for {@code graceNs} with no open connection, or
     * disconnected for the disconnect grace. Their state is released by {@link #dropInstanceState}.
     */
    default List<Reaped> reapStaleInstances(long timeoutNs, long graceNs) {
        return List.of();
    }

    default int trackedInstanceCount() {
        return 0;
    }

    /** Releases what this module holds for the instance (called for every reaped id, on every target). */
    default void dropInstanceState(long instanceId) {
    }

    /** Why an instance was reaped. */
    enum Reason {
        SILENCE("silence"),
        NEVER_PINGED("never_pinged"),
        DISCONNECT("disconnect");

        private final String label;

        Reason(String label) {
            this.label = label;
        }

        public String label() {
            return label;
        }
    }

    /** One reaped instance and why; {@code silentNs} is how long it had been quiet. */
    record Reaped(long instanceId, Reason reason, long silentNs) {}
}
