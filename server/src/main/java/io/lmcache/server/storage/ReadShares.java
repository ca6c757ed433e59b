package io.lmcache.server.storage;

import java.util.HashMap;
import java.util.Map;

/**
 * The bytes of objects each tenant (cache salt) holds read-locked by its LOOKUPs, and the cap on them:
 * a share of the pool ({@code --tenant-read-lock-share}). A read lock pins an object against eviction
 * until its RETRIEVE or its TTL, so one tenant that locks most of the pool would leave every other
 * tenant's STOREs nothing to evict but each other; past its share, a tenant's LOOKUP gets fewer hits
 * (counted), never another tenant's room. A store that holds one tenant's objects only caps nobody
 * (there is no other tenant to leave room for). An object counts once, with its first reader, until its
 * last reader goes or it is freed. Guarded by the object store's lock; holds entries only for tenants
 * holding locks now.
 */
final class ReadShares {
    /** One tenant's locked bytes; an object locked for it points here (see {@link StoredObject#readShare}). */
    static final class Tally {
        final String salt;
        long bytes;

        Tally(String salt) {
            this.salt = salt;
        }
    }

    private final Map<String, Tally> tallies = new HashMap<>();
    private long capBytes = Long.MAX_VALUE;

    /** Caps each tenant's locked bytes at {@code share} of {@code poolBytes}; {@code share >= 1}: no cap. */
    void setShare(double share, long poolBytes) {
        capBytes = share >= 1 ? Long.MAX_VALUE : (long) (share * poolBytes);
    }

    /** Whether {@code salt}'s tenant may lock {@code moreBytes} more (objects it does not hold locked yet). */
    boolean allows(String salt, long moreBytes) {
        if (capBytes == Long.MAX_VALUE || moreBytes == 0) {
            return true;
        }
        Tally tally = tallies.get(salt);
        return (tally == null ? 0 : tally.bytes) + moreBytes <= capBytes;
    }

    /** {@code object} got a reader under {@code salt}: counted with its first. */
    void locked(StoredObject object, String salt) {
        if (object.readShare == null) {
            Tally tally = tallies.computeIfAbsent(salt, Tally::new);
            tally.bytes += object.bytes;
            object.readShare = tally;
        }
    }

    /** {@code object} has no reader left, or is freed: no longer counted. Idempotent. */
    void unlocked(StoredObject object) {
        Tally tally = object.readShare;
        if (tally != null) {
            object.readShare = null;
            tally.bytes -= object.bytes;
            if (tally.bytes <= 0) {
                tallies.remove(tally.salt);
            }
        }
    }

    /** The bytes {@code salt}'s tenant holds locked now (tests, audit). */
    long lockedBytes(String salt) {
        Tally tally = tallies.get(salt);
        return tally == null ? 0 : tally.bytes;
    }

    /** Audit: the tallies add up to the locked objects' bytes. */
    void check(long lockedBytes) {
        long sum = 0;
        for (Tally tally : tallies.values()) {
            sum += tally.bytes;
        }
        if (sum != lockedBytes) {
            throw new IllegalStateException("read shares hold " + sum + " bytes, the read-locked objects " + lockedBytes);
        }
    }
}
