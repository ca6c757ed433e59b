package io.lmcache.server.metrics;

import io.lmcache.server.logging.LogText;
import io.lmcache.server.logging.RateLimitedLog;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.LongAdder;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Label values that come from the wire (model names, cache salts, worker ids): LMCache labels its
 * series with them, and a peer that sends a new salt with every request would otherwise grow the
 * scrape without bound. The first {@link #LIMIT} distinct values of a label keep their own series;
 * later ones are counted under {@link #OTHER}, with a counter and a rate-limited log line saying so.
 */
final class LabelValues {
    static final int LIMIT = 256;
    static final String OTHER = "_other";
    private static final int MAX_CHARS = 128;
    private static final Logger LOG = LoggerFactory.getLogger(LabelValues.class);
    private static final RateLimitedLog FOLDED_LINES = new RateLimitedLog(LOG, "metric label values folded", 5);

    private final Map<String, Set<String>> seen = new ConcurrentHashMap<>();
    private final Map<String, LongAdder> folded = new ConcurrentHashMap<>();
    private final ServerMetrics metrics;

    LabelValues(ServerMetrics metrics) {
        this.metrics = metrics;
    }

    /** The value to put on {@code label}: itself (clipped) while the label has room, else {@link #OTHER}. */
    String of(String label, String value) {
        String text = value == null ? "" : value.length() > MAX_CHARS ? value.substring(0, MAX_CHARS) : value;
        Set<String> values = seen.computeIfAbsent(label, l -> ConcurrentHashMap.newKeySet());
        if (values.contains(text)) {
            return text;
        }
        // two threads may both pass the size check and overshoot by a value each: a bound, not an exact count
        if (values.size() < LIMIT) {
            values.add(text);
            return text;
        }
        folded.computeIfAbsent(label, l -> metrics.declare(ServerCatalogue.LABEL_VALUES_FOLDED, l)).increment();
        FOLDED_LINES.warn("more than {} distinct values of the metric label {}: '{}' and later ones are counted under {}", LIMIT, label,
                LogText.clip(text), OTHER);
        return OTHER;
    }
}
