package io.lmcache.server.agent;

import java.util.List;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Quiet, complete shutdown (Agrona's {@code CloseHelper.closeAll}): closes every part in the order
 * given, and a part that throws is logged and counted but never keeps the rest open.
 */
public final class CloseHelper {
    private static final Logger LOG = LoggerFactory.getLogger(CloseHelper.class);

    private CloseHelper() {}

    /** Closes each non-null part in list order; returns how many failed. */
    public static int closeAll(List<? extends AutoCloseable> parts) {
        int failures = 0;
        for (AutoCloseable part : parts) {
            if (part == null) {
                continue;
            }
            try {
                part.close();
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                failures++;
                LOG.warn("interrupted while closing {}; closing the rest", part);
            } catch (Exception | LinkageError e) {
                failures++;
                LOG.warn("closing {} failed; closing the rest", part, e);
            }
        }
        return failures;
    }
}
