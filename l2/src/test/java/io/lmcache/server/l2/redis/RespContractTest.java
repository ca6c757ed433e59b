package io.lmcache.server.l2.redis;

import io.lmcache.server.l2.L2Adapter;
import io.lmcache.server.l2.L2AdapterContract;
import io.lmcache.server.l2.L2AdapterSpecs;
import io.lmcache.server.l2.L2Adapters;
import io.lmcache.server.l2.testing.RedisNodes;
import java.util.Map;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;

/** resp keeps the adapter contract, against a real redis-server (one for the class; each test its own keys). */
class RespContractTest extends L2AdapterContract {
    private static RedisNodes node;

    @BeforeAll
    static void startNode() {
        node = RedisNodes.standalone();
    }

    @AfterAll
    static void stopNode() {
        node.close();
    }

    @Override
    protected L2Adapter open() throws Exception {
        L2Adapter adapter = L2Adapters.create(L2AdapterSpecs.parse("{\"type\":\"resp\",\"host\":\"127.0.0.1\",\"port\":" + node.port(0)
                + ",\"request_timeout\":2}", Map.of()), Thread.ofPlatform().daemon().name("contract-resp-", 0).factory());
        AdapterDriver.awaitConnected(adapter);
        return adapter;
    }
}
