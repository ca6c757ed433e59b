package io.lmcache.server.l2;

import java.nio.file.Path;
import org.junit.jupiter.api.io.TempDir;

/** fault_inject with no rule matching keeps the adapter contract of the adapter it wraps (what it drops, FaultInjectAdapterTest). */
class FaultInjectContractTest extends L2AdapterContract {
    @TempDir
    Path dir;

    @Override
    protected L2Adapter open() throws Exception {
        return L2Adapters.create(L2AdapterSpecs.parse("{\"type\":\"fault_inject\",\"rate\":0,\"inner\":{\"type\":\"fs_native\",\"base_path\":\""
                + dir + "\"}}"), Thread.ofPlatform().daemon().name("contract-fault-", 0).factory());
    }
}
