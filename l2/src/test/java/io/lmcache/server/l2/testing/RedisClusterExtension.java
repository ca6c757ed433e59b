package io.lmcache.server.l2.testing;

import org.junit.jupiter.api.extension.AfterAllCallback;
import org.junit.jupiter.api.extension.BeforeAllCallback;
import org.junit.jupiter.api.extension.ExtensionContext;

/**
 * One real Redis cluster for a test class ({@code @RegisterExtension static final RedisClusterExtension CLUSTER = new
 * RedisClusterExtension(3)}): started before its first test, stopped by PID after its last.
 */
public final class RedisClusterExtension implements BeforeAllCallback, AfterAllCallback {
    private final int masters;
    private RedisNodes nodes;

    public RedisClusterExtension(int masters) {
        this.masters = masters;
    }

    @Override
    public void beforeAll(ExtensionContext context) {
        nodes = RedisNodes.cluster(masters);
    }

    @Override
    public void afterAll(ExtensionContext context) {
        if (nodes != null) {
            nodes.close();
            nodes = null;
        }
    }

    /** The cluster's nodes (valid between the class's first and last test). */
    public RedisNodes nodes() {
        return nodes;
    }
}
