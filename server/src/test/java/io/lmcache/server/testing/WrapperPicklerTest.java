package io.lmcache.server.testing;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.lmcache.server.protocol.Request;
import io.lmcache.server.protocol.RequestDecoder;
import io.lmcache.server.protocol.TensorWrapper;
import io.lmcache.server.protocol.testing.Golden;
import java.util.Arrays;
import org.junit.jupiter.api.Test;
import org.msgpack.core.ExtensionTypeHeader;
import org.msgpack.core.MessagePack;
import org.msgpack.core.MessageUnpacker;

/** The Java test client's pickles are the real client's bytes: every golden CPU wrapper is rebuilt exactly. */
class WrapperPicklerTest {
    @Test
    void everyGoldenCpuWrapperIsRebuiltByteForByte() throws Exception {
        int compared = 0;
        for (String file : Golden.files()) {
            for (Golden.Message m : Golden.load(file)) {
                if (!m.clientToServer() || !m.op().equals("register_kv_cache")) {
                    continue;
                }
                Request.RegisterKvCache register = new RequestDecoder()
                        .registerKvCache(m.frames(), 2, m.frames().length);
                try (MessageUnpacker unpacker = MessagePack.newDefaultUnpacker(m.payload(1))) {
                    int count = unpacker.unpackArrayHeader();
                    for (int i = 0; i < count; i++) {
                        ExtensionTypeHeader header = unpacker.unpackExtensionTypeHeader();
                        byte[] golden = unpacker.readPayload(header.getLength());
                        if (!(register.kvCaches().get(i) instanceof TensorWrapper.CpuShm shm)) {
                            continue;
                        }
                        byte[] ours = WrapperPickler.cpuShm(shm.shmName(), shm.nbytes(), shm.dtype().torchName(), shm.shape(),
                                shm.stride(), shm.storageOffset());
                        assertArrayEquals(golden, ours, () -> m + " wrapper differs:\n" + Arrays.toString(golden) + "\n" + Arrays.toString(ours));
                        compared++;
                    }
                }
            }
        }
        assertTrue(compared >= 10, "compared " + compared + " golden wrappers");
    }
}
