package io.lmcache.server.l2;

import java.nio.file.Path;
import org.junit.jupiter.api.io.TempDir;

/** fs_native keeps the adapter contract. */
class FsNativeContractTest extends L2AdapterContract {
    @TempDir
    Path dir;

    @Override
    protected L2Adapter open() throws Exception {
        return L2Adapters.create(L2AdapterSpecs.parse("{\"type\":\"fs_native\",\"base_path\":\"" + dir + "\"}"),
                Thread.ofPlatform().daemon().name("contract-fs-", 0).factory());
    }
}
