package io.lmcache.server.transfer;

import io.lmcache.server.logging.LogText;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * Registrations that were refused, by instance id: why (for the log of its transfers) and the GPU
 * it named (so failure replies carry an event on that GPU). Oldest first and bounded, so a flood
 * of failing registrations cannot grow it without end. A leaf lock of its own.
 */
public final class RegistrationFailures {
    private static final int MAX_FAILED_REGISTRATIONS = 4096;

    /** One refused registration. */
    public record Failed(String reason, String deviceUuid) {}

    private final Map<Long, Failed> failed = new LinkedHashMap<>() {
        @Override
        protected boolean removeEldestEntry(Map.Entry<Long, Failed> eldest) {
            return size() > MAX_FAILED_REGISTRATIONS;
        }
    };

    /** Kept clipped (reason: a message; device: a value of a status page): 4096 entries of at most a few hundred characters each. */
    public synchronized void put(long instanceId, String reason, String deviceUuid) {
        failed.put(instanceId, new Failed(LogText.message(reason), deviceUuid == null ? null : LogText.status(deviceUuid)));
    }

    public synchronized void remove(long instanceId) {
        failed.remove(instanceId);
    }

    /** The refused registration of this id, or null. */
    public synchronized Failed get(long instanceId) {
        return failed.get(instanceId);
    }
}
