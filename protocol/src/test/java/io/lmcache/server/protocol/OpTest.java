package io.lmcache.server.protocol;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.util.EnumSet;
import java.util.Set;
import org.junit.jupiter.api.Test;

class OpTest {
    @Test
    void theOpsOfAClientsStartAreItsHandshakeAndRegistrationsOnly() {
        Set<Op> atStart = EnumSet.noneOf(Op.class);
        for (Op op : Op.values()) {
            if (op.sentAtClientStart()) {
                atStart.add(op);
            }
        }
        assertEquals(EnumSet.of(Op.GET_CHUNK_SIZE, Op.GET_EXPERIMENTAL, Op.NOOP, Op.PING, Op.REGISTER_KV_CACHE,
                Op.REGISTER_KV_CACHE_ENGINE_DRIVEN_CONTEXT, Op.REGISTER_LAYERWISE_IPC_EVENT_POOL, Op.SUBSCRIBE_KV_EVENTS), atStart,
                "a request that asks for KV (LOOKUP, STORE, RETRIEVE, the prefetch and engine-driven ops) is never one of them");
    }
}
