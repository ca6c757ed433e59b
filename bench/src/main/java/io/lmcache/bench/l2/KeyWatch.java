package io.lmcache.bench.l2;

import static io.lmcache.bench.l2.BenchChecks.check;

import io.lettuce.core.RedisClient;
import io.lettuce.core.RedisURI;
import io.lettuce.core.pubsub.RedisPubSubAdapter;
import io.lettuce.core.pubsub.StatefulRedisPubSubConnection;
import io.lmcache.server.l2.testing.RedisNodes;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.LockSupport;

/**
 * Counts the SETs every node of a cluster carried out (but of keys under one prefix), from its keyspace notifications
 * ({@code __keyevent@0__:set}): a key is set
 * once its whole value has arrived, so this tells when a write-through is complete without sending the nodes any command while
 * they are receiving (polling DBSIZE would take Redis's and the client's CPU from the measurement).
 */
final class KeyWatch implements AutoCloseable {
    private static final String CHANNEL = "__keyevent@0__:set";

    private final RedisClient client;
    private final List<StatefulRedisPubSubConnection<String, String>> connections = new ArrayList<>();
    private final AtomicLong sets = new AtomicLong();

    private KeyWatch(RedisClient client) {
        this.client = client;
    }

    static KeyWatch start(RedisNodes cluster, String prefixNotCounted) {
        KeyWatch watch = new KeyWatch(RedisClient.create());
        for (int node = 0; node < cluster.size(); node++) {
            RedisURI uri = RedisURI.create("127.0.0.1", cluster.port(node));
            try (var admin = watch.client.connect(uri)) {
                admin.sync().configSet("notify-keyspace-events", "E$");
            }
            StatefulRedisPubSubConnection<String, String> pubSub = watch.client.connectPubSub(uri);
            pubSub.addListener(new RedisPubSubAdapter<>() {
                @Override
                public void message(String channel, String key) {
                    if (!key.startsWith(prefixNotCounted)) {
                        watch.sets.incrementAndGet();
                    }
                }
            });
            pubSub.sync().subscribe(CHANNEL);
            watch.connections.add(pubSub);
        }
        return watch;
    }

    /** SETs seen so far, but of keys under the prefix not counted (the plain loop's). */
    long count() {
        return sets.get();
    }

    /** Until {@link #count} reaches {@code target}; parks between reads (no command to the nodes). */
    void await(long target, long waitNs) {
        long deadlineNs = System.nanoTime() + waitNs;
        while (sets.get() < target) {
            check(deadlineNs - System.nanoTime() > 0, target + " SETs within " + TimeUnit.NANOSECONDS.toSeconds(waitNs) + " s, got " + sets.get());
            LockSupport.parkNanos(TimeUnit.MICROSECONDS.toNanos(200));
        }
    }

    @Override
    public void close() {
        connections.forEach(StatefulRedisPubSubConnection::close);
        client.shutdown();
    }
}
