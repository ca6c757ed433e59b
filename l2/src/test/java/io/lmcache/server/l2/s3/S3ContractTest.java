package io.lmcache.server.l2.s3;

import io.lmcache.server.l2.L2Adapter;
import io.lmcache.server.l2.L2AdapterContract;
import io.lmcache.server.l2.L2AdapterSpecs;
import io.lmcache.server.l2.L2Adapters;
import io.lmcache.server.l2.testing.S3ProxyServer;
import java.util.Map;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;

/** s3 keeps the adapter contract, against a real S3 server (S3Proxy, signatures checked; one for the class, each test its own keys). */
class S3ContractTest extends L2AdapterContract {
    private static S3ProxyServer server;

    @BeforeAll
    static void startServer() {
        server = S3ProxyServer.start();
    }

    @AfterAll
    static void stopServer() {
        server.close();
    }

    @Override
    protected L2Adapter open() throws Exception {
        return L2Adapters.create(L2AdapterSpecs.parse(server.adapterJson(""), Map.of()), Thread.ofPlatform().daemon().name("contract-s3-", 0)
                .factory());
    }
}
