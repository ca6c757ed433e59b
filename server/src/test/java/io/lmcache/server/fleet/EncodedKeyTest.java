package io.lmcache.server.fleet;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.lmcache.server.l2.L2Key;
import io.lmcache.server.storage.ChunkHash;
import java.util.Map;
import org.junit.jupiter.api.Test;

/** LMCache's EncodedObjectKey on the wire: its field names, the unsigned packed rank, the invariants. */
class EncodedKeyTest {
    private static final ObjectMapper JSON = new ObjectMapper();

    @Test
    void aPackedRankOfAWideWorldIsUnsignedOnTheWireAndRoundTrips() throws Exception {
        int rank = L2Key.packKvRank(255, 254); // world_size << 24 passes 2^31: negative as a Java int
        EncodedKey key = new EncodedKey(new ChunkHash(1, 2, 3, 4), "m", rank, 2, "tenant");
        JsonNode wire = JSON.valueToTree(key.toJson());
        assertEquals(Integer.toUnsignedLong(rank), wire.path("kv_rank").asLong());
        assertEquals(JSON.readTree("[\"chunk_hash_hex\",\"model_name\",\"kv_rank\",\"object_group_id\",\"cache_salt\"]"),
                JSON.valueToTree(JSON.convertValue(wire, Map.class).keySet()));
        assertEquals(key, EncodedKey.parse(wire));
        assertEquals(key, EncodedKey.of(key.l2Key()));
    }

    @Test
    void aRankBeyondThirtyTwoBitsOrNegativeIsRefused() {
        for (long bad : new long[] {-1, 1L << 32}) {
            JsonNode wire = JSON.valueToTree(Map.of("chunk_hash_hex", "00".repeat(32), "model_name", "m", "kv_rank", bad));
            assertThrows(EncodedKey.Invalid.class, () -> EncodedKey.parse(wire), Long.toString(bad));
        }
    }
}
