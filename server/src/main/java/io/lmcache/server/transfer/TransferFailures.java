package io.lmcache.server.transfer;

import io.lmcache.server.logging.LogText;
import io.lmcache.server.logging.RateLimitedLogs;
import io.lmcache.server.metrics.ServerMetrics;
import io.lmcache.server.metrics.TransferCatalogue;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Counts (by op and reason) and logs the STORE/RETRIEVE requests of LMCache-driven transfers answered with false;
 * a peer can cause one per message, so the lines are rate-limited per reason.
 */
public final class TransferFailures {
    private static final Logger LOG = LoggerFactory.getLogger(TransferFailures.class);
    private static final String[] REASONS = {"unknown_instance", "registration_failed", "bad_range", "bad_worker_id", "bad_block_ids",
        "tensors_gone", "copy_failed", "no_memory", "not_found", "bad_skip"};

    /** Per reason: a flood of unknown-instance STOREs does not hide the first copy failure. */
    private static final RateLimitedLogs LINES = new RateLimitedLogs(LOG, "transfer failures", 10);

    private final ServerMetrics metrics;

    public TransferFailures(ServerMetrics metrics) {
        this.metrics = metrics;
        for (String op : new String[] {"store", "retrieve"}) {
            for (String reason : REASONS) {
                metrics.declare(TransferCatalogue.TRANSFER_FAILURES, op, reason);
            }
        }
    }

    /** Counts one failure; logs {@code message} unless it is null. */
    public void fail(String op, String reason, String message) {
        metrics.increment(TransferCatalogue.TRANSFER_FAILURES, op, reason);
        if (message != null) {
            LINES.of(reason).warn("{}; answering false", LogText.message(message));
        }
    }

    /** A refused plan: counted under its reason, logged as {@code OP for instance ID: why}. */
    public void refused(String op, long instanceId, PlanResult.Refused refused) {
        fail(op, refused.reason(), op.toUpperCase() + " for instance " + instanceId + ": " + refused.message());
    }
}
