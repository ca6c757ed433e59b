package io.lmcache.server.l2.redis;

import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.LockSupport;
import org.slf4j.Logger;

/**
 * The L1 buffers a networked adapter has lent to its client (Lettuce, the S3 client), one per value on the wire. Each goes back
 * when its key answers; at close the ones still out get a bounded wait and are then revoked, so no copy touches L1 after the
 * adapter is drained, whatever the client still holds.
 *
 * @param <T> the adapter's lent-buffer type
 */
public final class LentBuffers<T extends LentBuffers.Revocable> {
    /** A lent buffer: after {@link #revoke} returns nothing reads or writes it again. */
    public interface Revocable {
        void revoke();
    }

    private final Set<T> lent = ConcurrentHashMap.newKeySet();

    /** {@code buffer} is out from now on. */
    public T lend(T buffer) {
        lent.add(buffer);
        return buffer;
    }

    /** {@code buffer}'s key answered: revoked and no longer out. */
    public void giveBack(T buffer) {
        buffer.revoke();
        lent.remove(buffer);
    }

    /** Waits up to {@code waitNs} for the buffers still out, then revokes them (one line when any were left). */
    public void drain(Logger log, String name, long waitNs) {
        long deadlineNs = System.nanoTime() + waitNs;
        while (!lent.isEmpty() && deadlineNs - System.nanoTime() > 0) {
            LockSupport.parkNanos(TimeUnit.MILLISECONDS.toNanos(5));
        }
        if (!lent.isEmpty()) {
            log.warn("{}: {} value(s) still in flight after {} ms at close; abandoned", name, lent.size(), TimeUnit.NANOSECONDS.toMillis(waitNs));
        }
        lent.forEach(Revocable::revoke);
    }
}
