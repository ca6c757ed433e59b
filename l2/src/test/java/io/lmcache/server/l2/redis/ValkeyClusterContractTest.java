package io.lmcache.server.l2.redis;

import io.lmcache.server.l2.L2Adapter;
import io.lmcache.server.l2.L2AdapterContract;
import io.lmcache.server.l2.L2AdapterSpecs;
import io.lmcache.server.l2.L2Adapters;
import io.lmcache.server.l2.testing.RedisClusterExtension;
import java.util.Map;
import org.junit.jupiter.api.extension.RegisterExtension;

/** valkey in cluster mode keeps the adapter contract, against a real 3-master redis-server cluster (keys spread over every slot). */
class ValkeyClusterContractTest extends L2AdapterContract {
    @RegisterExtension
    static final RedisClusterExtension CLUSTER = new RedisClusterExtension(3);

    @Override
    protected L2Adapter open() throws Exception {
        L2Adapter adapter = L2Adapters.create(L2AdapterSpecs.parse("{\"type\":\"valkey\",\"startup_nodes\":\"" + CLUSTER.nodes().startupNodes()
                + "\",\"cluster_mode\":true,\"request_timeout\":2}", Map.of()), Thread.ofPlatform().daemon().name("contract-valkey-", 0).factory());
        AdapterDriver.awaitConnected(adapter);
        return adapter;
    }
}
