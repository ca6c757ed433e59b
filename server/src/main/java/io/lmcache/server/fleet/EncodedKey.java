package io.lmcache.server.fleet;

import com.fasterxml.jackson.databind.JsonNode;
import io.lmcache.server.l2.L2Hash;
import io.lmcache.server.l2.L2Key;
import io.lmcache.server.storage.ChunkHash;
import io.lmcache.server.storage.ChunkKey;
import java.util.HexFormat;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * LMCache's {@code EncodedObjectKey} (lmcache/v1/distributed/api.py): one object's name on the coordinator's wire, with its
 * invariants (model without {@code @}, group {@code >= 0}, salt without {@code @ / \ NUL} and at most 128 characters, the hash
 * 64 hex digits). A key that breaks one is refused before anything is looked up.
 */
public record EncodedKey(ChunkHash hash, String modelName, int kvRank, int objectGroupId, String cacheSalt) {
    /** LMCache's limit on a salt (vLLM's {@code _MAX_CACHE_SALT_LENGTH}). */
    static final int MAX_SALT_CHARS = 128;
    /** As the ZeroMQ path's model_name (WireField.MODEL_NAME). */
    static final int MAX_MODEL_CHARS = 4096;

    /** A key the caller sent that breaks an invariant; the message names the field. */
    public static final class Invalid extends Exception {
        private static final long serialVersionUID = 1L;

        Invalid(String message) {
            super(message, null, false, false);
        }
    }

    public static EncodedKey of(ChunkKey key) {
        return new EncodedKey(key.hash(), key.model(), key.kvRank(), key.group(), key.salt() == null ? "" : key.salt());
    }

    public static EncodedKey of(L2Key key) {
        L2Hash h = key.hash();
        return new EncodedKey(new ChunkHash(h.w0(), h.w1(), h.w2(), h.w3()), key.model(), key.kvRank(), key.objectGroup(),
                key.salt() == null ? "" : key.salt());
    }

    public ChunkKey chunkKey() {
        return new ChunkKey(modelName, cacheSalt, kvRank, objectGroupId, hash);
    }

    public L2Key l2Key() {
        return L2Key.of(modelName, kvRank, objectGroupId, new L2Hash(hash.w0(), hash.w1(), hash.w2(), hash.w3()), cacheSalt);
    }

    /** The wire form, in LMCache's field order. */
    public Map<String, Object> toJson() {
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("chunk_hash_hex", hash.hex());
        out.put("model_name", modelName);
        out.put("kv_rank", Integer.toUnsignedLong(kvRank)); // LMCache's packed rank is unsigned: world_size << 24 passes 2^31
        out.put("object_group_id", objectGroupId);
        out.put("cache_salt", cacheSalt);
        return out;
    }

    /** Parses and checks one key of a request. */
    public static EncodedKey parse(JsonNode node) throws Invalid {
        if (node == null || !node.isObject()) {
            throw new Invalid("must be an object {chunk_hash_hex, model_name, kv_rank, object_group_id, cache_salt}");
        }
        JsonNode hex = node.path("chunk_hash_hex");
        if (!hex.isTextual() || hex.asText().length() != 2 * ChunkHash.BYTES || !hex.asText().matches("[0-9a-fA-F]+")) {
            throw new Invalid("chunk_hash_hex must be " + 2 * ChunkHash.BYTES + " hex digits");
        }
        JsonNode model = node.path("model_name");
        if (!model.isTextual() || model.asText().isEmpty() || model.asText().length() > MAX_MODEL_CHARS || model.asText().contains("@")) {
            throw new Invalid("model_name must be a non-empty string without '@' of at most " + MAX_MODEL_CHARS + " characters");
        }
        JsonNode rank = node.path("kv_rank");
        if (!rank.isIntegralNumber() || !rank.canConvertToLong() || rank.asLong() < 0 || rank.asLong() > 0xFFFF_FFFFL) {
            throw new Invalid("kv_rank must be an integer in 0..2^32-1");
        }
        JsonNode group = node.path("object_group_id");
        if (!group.isMissingNode() && (!group.isIntegralNumber() || !group.canConvertToInt() || group.asInt() < 0)) {
            throw new Invalid("object_group_id must be an integer >= 0");
        }
        JsonNode salt = node.path("cache_salt");
        if (!salt.isMissingNode() && !salt.isTextual()) {
            throw new Invalid("cache_salt must be a string");
        }
        String saltText = salt.asText("");
        if (saltText.length() > MAX_SALT_CHARS || saltText.chars().anyMatch(c -> c == '@' || c == '/' || c == '\\' || c == 0)) {
            throw new Invalid("cache_salt must have at most " + MAX_SALT_CHARS + " characters and none of @ / \\ NUL");
        }
        return new EncodedKey(ChunkHash.of(HexFormat.of().parseHex(hex.asText())), model.asText(), (int) rank.asLong(),
                group.isMissingNode() ? 0 : group.asInt(), saltText);
    }
}
