package io.lmcache.server.metrics;

import io.lmcache.server.logging.LogText;
import io.lmcache.server.logging.RateLimitedLog;
import java.nio.charset.StandardCharsets;
import java.security.GeneralSecurityException;
import java.security.SecureRandom;
import java.util.HexFormat;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.LongAdder;
import javax.crypto.Mac;
import javax.crypto.spec.SecretKeySpec;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Label values that come from the wire (model names, cache salts, worker ids): LMCache labels its
 * series with them, and a peer that sends a new salt with every request would otherwise grow the
 * scrape without bound. The first {@link #LIMIT} distinct values of a label keep their own series;
 * later ones are counted under {@link #OTHER}, with a counter and a rate-limited log line saying so.
 * A value is clipped to {@link #MAX_CHARS}, so a label holds at most {@code LIMIT * MAX_CHARS} chars.
 *
 * <p>A cache salt is a tenant's secret ({@code /metrics} needs no token, and a salt plus a prompt
 * is all a LOOKUP under another's tenant needs): unless {@link #showSecretsInClear} was asked for,
 * its label is a keyed digest, {@code s-} and the first 16 hex digits of HMAC-SHA256 under a key
 * drawn at random per process (stable for the process's life, so rates work; unlinkable across
 * restarts and servers). The empty salt, no tenant's secret, stays empty.
 */
final class LabelValues {
    static final int LIMIT = 256;
    static final String OTHER = "_other";
    static final int MAX_CHARS = 128;
    /** The labels whose values come from the wire ({@link ServerMetrics#declare} folds them all past its cap on series). */
    static final Set<String> WIRE = Set.of("model_name", "cache_salt", "worker_id", "engine_id");
    /** Labels whose values are secrets: digested unless shown in clear. */
    private static final Set<String> SECRET = Set.of("cache_salt");
    private static final Logger LOG = LoggerFactory.getLogger(LabelValues.class);
    private static final RateLimitedLog FOLDED_LINES = new RateLimitedLog(LOG, "metric label values folded", 5);

    /** Per label: the wire value (at most {@link #MAX_CHARS}) to what the series shows, at most {@link #LIMIT} entries. */
    private final Map<String, Map<String, String>> seen = new ConcurrentHashMap<>();
    private final Map<String, LongAdder> folded = new ConcurrentHashMap<>();
    private final ServerMetrics metrics;
    private final Mac mac;
    private volatile boolean secretsInClear;

    LabelValues(ServerMetrics metrics) {
        this.metrics = metrics;
        byte[] key = new byte[32];
        new SecureRandom().nextBytes(key);
        try {
            mac = Mac.getInstance("HmacSHA256");
            mac.init(new SecretKeySpec(key, "HmacSHA256"));
        } catch (GeneralSecurityException e) {
            throw new IllegalStateException("HmacSHA256 is part of every JDK", e);
        }
    }

    /** {@code --metrics-clear-salt-labels}: secret labels show the value itself; call before the first series is made. */
    void showSecretsInClear(boolean clear) {
        this.secretsInClear = clear;
    }

    /** The value to put on {@code label}: itself (clipped, or its digest for a secret) while the label has room, else {@link #OTHER}. */
    String of(String label, String value) {
        String text = value == null ? "" : value;
        boolean secret = !secretsInClear && SECRET.contains(label) && !text.isEmpty();
        Map<String, String> values = seen.computeIfAbsent(label, l -> new ConcurrentHashMap<>());
        // a secret is digested whole (two salts sharing their first chars are two tenants); others are clipped first
        String key = secret || text.length() <= MAX_CHARS ? text : text.substring(0, MAX_CHARS);
        String shown = key.length() <= MAX_CHARS ? values.get(key) : null;
        if (shown != null) {
            return shown;
        }
        if (values.size() >= LIMIT && key.length() <= MAX_CHARS) {
            return fold(label, secret ? "(a salt)" : key); // no digest to make for a value that gets no series
        }
        if (secret) {
            shown = digest(text);
            if (key.length() > MAX_CHARS) {
                // too long to keep as a key: known by its digest, which is bounded (the NUL keeps it apart from any short salt)
                key = "\0" + shown;
            }
        } else {
            shown = key;
        }
        // two threads may both pass the size check and overshoot by a value each: a bound, not an exact count
        if (values.containsKey(key) || values.size() < LIMIT) {
            values.putIfAbsent(key, shown);
            return shown;
        }
        return fold(label, secret ? shown : key);
    }

    private String fold(String label, String shown) {
        folded.computeIfAbsent(label, l -> metrics.declare(ServerCatalogue.LABEL_VALUES_FOLDED, l)).increment();
        FOLDED_LINES.warn("more than {} distinct values of the metric label {}: '{}' and later ones are counted under {}", LIMIT, label,
                LogText.clip(shown), OTHER);
        return OTHER;
    }

    /** {@code s-} and 16 hex digits of the value's HMAC under this process's key. */
    String digest(String value) {
        byte[] sum;
        synchronized (mac) {
            sum = mac.doFinal(value.getBytes(StandardCharsets.UTF_8));
        }
        return "s-" + HexFormat.of().formatHex(sum, 0, 8);
    }
}
