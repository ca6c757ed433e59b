package io.lmcache.server.fleet;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.lmcache.server.http.HttpApi;
import io.lmcache.server.storage.ChunkHash;
import io.lmcache.server.storage.ChunkKey;
import io.lmcache.server.storage.ObjectStore;
import io.lmcache.server.storage.ReadyStores;
import io.lmcache.server.storage.StoredObject;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/** {@code DELETE}/{@code GET /cache/objects} on an L1-only server: LMCache's validation, lock rule, counts and tenant boundary. */
class ObjectControlTest {
    private static final ObjectMapper JSON = new ObjectMapper();
    private final ObjectStore store = ReadyStores.lru(8L << 20, 8L << 20);
    private final ObjectControl control = new ObjectControl(store, List.of());

    private ChunkKey stored(String salt, long n) {
        ChunkKey key = new ChunkKey("m", salt, 0, 0, new ChunkHash(n, n, n, n));
        StoredObject object = store.reserve(key, 4096, 1);
        assertTrue(store.commit(object));
        return key;
    }

    private static ObjectNode body(String tier, boolean force, ChunkKey... keys) {
        ObjectNode body = JSON.createObjectNode();
        ArrayNode list = body.putArray("keys");
        for (ChunkKey key : keys) {
            list.add(JSON.valueToTree(EncodedKey.of(key).toJson()));
        }
        body.put("tier", tier);
        body.put("force", force);
        return body;
    }

    private static JsonNode json(HttpApi.Response response) throws Exception {
        return JSON.readTree(response.body());
    }

    @Test
    void anL1DeleteRemovesUnlockedObjectsSkipsLockedOnesUnlessForcedAndCountsAsLmcache() throws Exception {
        ChunkKey free = stored("", 1);
        ChunkKey locked = stored("", 2);
        assertTrue(store.lockReady(locked, 1, new ArrayList<>()));
        HttpApi.Response reply = control.delete(body("l1", false, free, locked, new ChunkKey("m", "", 0, 0, new ChunkHash(9, 9, 9, 9))));
        assertEquals(200, reply.status());
        assertEquals(JSON.readTree("{\"deleted\":1,\"skipped\":1,\"ok\":true}"), json(reply));
        assertEquals(1, store.objectCount());
        assertEquals(JSON.readTree("{\"deleted\":1,\"skipped\":0,\"ok\":true}"), json(control.delete(body("l1", true, locked))));
        assertEquals(0, store.objectCount());
    }

    @Test
    void aSaltedObjectIsReachedOnlyByNamingItsSalt() throws Exception {
        ChunkKey salted = stored("tenant-a", 3);
        ChunkKey sameHashNoSalt = new ChunkKey("m", "", 0, 0, salted.hash());
        assertEquals(0, json(control.delete(body("l1", true, sameHashNoSalt))).path("deleted").asInt());
        assertEquals(0, json(control.delete(body("l1", true, new ChunkKey("m", "tenant-b", 0, 0, salted.hash())))).path("deleted").asInt());
        assertEquals(1, store.objectCount());
        assertEquals(1, json(control.delete(body("l1", true, salted))).path("deleted").asInt());
    }

    @Test
    void requestsAreCheckedBeforeAnythingIsRemoved() throws Exception {
        ChunkKey key = stored("", 4);
        ObjectNode bad = body("l1", false, key);
        ((ObjectNode) bad.withArray("keys").addObject()).put("chunk_hash_hex", "zz").put("model_name", "m").put("kv_rank", 0);
        HttpApi.Response reply = control.delete(bad);
        assertEquals(400, reply.status());
        assertTrue(json(reply).path("detail").asText().startsWith("keys[1]: chunk_hash_hex"), json(reply).toString());
        assertEquals(1, store.objectCount(), "the valid key before the bad one was not removed");
        for (Map<String, Object> key2 : List.of(Map.<String, Object>of("chunk_hash_hex", "00".repeat(32), "model_name", "a@b", "kv_rank", 0),
                Map.<String, Object>of("chunk_hash_hex", "00".repeat(32), "model_name", "m", "kv_rank", 0, "object_group_id", -1),
                Map.<String, Object>of("chunk_hash_hex", "00".repeat(32), "model_name", "m", "kv_rank", 0, "cache_salt", "a/b"),
                Map.<String, Object>of("chunk_hash_hex", "00".repeat(32), "model_name", "m", "kv_rank", 0, "cache_salt", "x".repeat(129)))) {
            assertEquals(400, control.delete(JSON.valueToTree(Map.of("keys", List.of(key2), "tier", "l1"))).status(), key2.toString());
        }
        ObjectNode many = JSON.createObjectNode();
        ArrayNode keys = many.putArray("keys");
        for (int i = 0; i <= ObjectControl.MAX_KEYS; i++) {
            keys.add(JSON.valueToTree(EncodedKey.of(key).toJson()));
        }
        many.put("tier", "l1");
        assertEquals(400, control.delete(many).status());
        assertTrue(json(control.delete(many)).path("detail").asText().startsWith("too many keys"));
        assertEquals(400, control.delete(body("l3", false, key)).status());
        assertEquals(422, control.delete(JSON.createObjectNode()).status());
        assertEquals(1, store.objectCount());
    }

    @Test
    void anL2PartWithoutAnAdapterIsLmcaches503AndTheListingTakesOnlyL2() throws Exception {
        ChunkKey key = stored("", 5);
        ObjectNode defaultTier = body("l2", false, key);
        defaultTier.remove("tier");
        assertEquals(503, control.delete(defaultTier).status(), "the default tier is l2");
        assertEquals(503, control.delete(body("all", false, key)).status());
        assertEquals(1, store.objectCount(), "nothing removed when the request cannot be served whole");
        assertEquals(400, control.list(Map.of("tier", "l1")).status());
        assertEquals(400, control.list(Map.of("page_size", "0")).status());
        assertEquals(503, control.list(Map.of()).status());
        assertFalse(json(control.list(Map.of())).path("detail").asText().isEmpty());
    }
}
