package io.lmcache.server.l2.redis;

import static org.junit.jupiter.api.Assertions.assertEquals;

import io.lmcache.server.l2.L2Hash;
import io.lmcache.server.l2.L2Key;
import org.junit.jupiter.api.Test;

/**
 * Valkey/Redis keys against LMCache's {@code ValkeyL2Adapter._wire_key} and {@code _object_key_to_string}, worked by hand:
 * {@code [key_prefix@]model@{kv_rank:08x}@{object_group_id:x}@{chunk_hash.hex()}[@cache_salt]}, the model as it is (no "-SEP-").
 */
class RedisWireKeyTest {
    private static final L2Hash HASH = new L2Hash(0x0123456789abcdefL, 0xfedcba9876543210L, 0x1L, 0x0L);
    private static final String HEX = "0123456789abcdeffedcba987654321000000000000000010000000000000000";

    @Test
    void withAndWithoutKeyPrefixAndSalt() {
        L2Key plain = L2Key.of("Qwen/Qwen3-8B", L2Key.packKvRank(1, 0), 0, HASH, "");
        assertEquals("Qwen/Qwen3-8B@01000100@0@" + HEX, RedisIo.wireKey("", plain));
        assertEquals("fleet1@Qwen/Qwen3-8B@01000100@0@" + HEX, RedisIo.wireKey("fleet1", plain));
        L2Key salted = L2Key.of("Qwen/Qwen3-8B", L2Key.packKvRank(2, 1), 0xb, HASH, "tenant-a");
        assertEquals("Qwen/Qwen3-8B@02010201@b@" + HEX + "@tenant-a", RedisIo.wireKey("", salted));
        assertEquals("fleet1@Qwen/Qwen3-8B@02010201@b@" + HEX + "@tenant-a", RedisIo.wireKey("fleet1", salted));
    }
}
