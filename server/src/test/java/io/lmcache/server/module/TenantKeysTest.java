package io.lmcache.server.module;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.lmcache.server.metrics.ServerMetrics;
import io.lmcache.server.protocol.CacheKey;
import io.lmcache.server.protocol.RequestConfigs;
import io.lmcache.server.protocol.Reply;
import io.lmcache.server.protocol.Request;
import io.lmcache.server.protocol.RequestTags;
import io.lmcache.server.protocol.TokenHashChain;
import io.lmcache.server.storage.ChunkHash;
import io.lmcache.server.storage.ChunkKey;
import io.lmcache.server.storage.ObjectStore;
import io.lmcache.server.storage.ReadyStores;
import io.lmcache.server.storage.StoredObject;
import io.lmcache.server.transfer.ChunkHashes;
import io.lmcache.server.transfer.ObjectGroupCatalog;
import java.util.Arrays;
import java.util.HexFormat;
import java.util.List;
import java.util.Random;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/**
 * The key path with LMCache's chain and tenant fields: chunk keys carry {@link TokenHashChain}'s 32-byte hashes exactly, a
 * prefix hashed chunk by chunk equals one hashed at once, and a LOOKUP meets only what was stored under its own salt and tag
 * set.
 */
class TenantKeysTest {
    private static final int CHUNK = 16;
    private static final int CHUNKS = 4;
    private static final long OBJECT_BYTES = 4096;
    private static final RequestTags TENANT_A = RequestTags.of(List.of(new RequestTags.Tag("tenant", "a")));
    private static final RequestTags TENANT_B = RequestTags.of(List.of(new RequestTags.Tag("tenant", "b")));
    private static final RequestTags TENANT_A_V2 = RequestTags.of(List.of(new RequestTags.Tag("tenant", "a"), new RequestTags.Tag("v", "2")));

    private final int[] tokens = new Random(27).ints(CHUNKS * CHUNK + 3, 0, 151_936).toArray();

    @Test
    void chunkKeysCarryTheChainsHashesByteForByte() {
        byte[] direct = new byte[TokenHashChain.HASH_BYTES * CHUNKS];
        TokenHashChain.blake3().hashChunks(tokens, CHUNK, 0, CHUNKS, direct);
        ChunkHashes hashes = ChunkHashes.hash(key("", RequestTags.NONE, "r"), CHUNK, CHUNKS);
        assertArrayEquals(direct, hashes.bytes());
        for (int c = 0; c < CHUNKS; c++) {
            ChunkHash hash = hashes.hash(c);
            String hex = HexFormat.of().formatHex(direct, 32 * c, 32 * c + 32);
            assertEquals(hex, hash.hex(), "LMCache's chunk_hash.hex(): 64 lower-case digits");
            assertEquals(64, hash.hex().length());
            assertArrayEquals(Arrays.copyOfRange(direct, 32 * c, 32 * c + 32), hash.bytes());
            assertEquals(hash, ChunkHash.of(hash.bytes()));
        }
    }

    @Test
    void aPrefixHashedChunkByChunkEqualsOneHashedAtOnce() {
        CacheKey key = key("", RequestTags.NONE, "r");
        byte[] whole = ChunkHashes.of(key, CHUNK, CHUNKS);
        byte[] stepwise = new byte[whole.length];
        for (int c = 0; c < CHUNKS; c++) {
            ChunkHashes.extend(key, CHUNK, c, c + 1, stepwise);
        }
        assertArrayEquals(whole, stepwise);
        // a longer prompt with the same first chunks shares their hashes: a prefix names the same keys
        int[] longer = Arrays.copyOf(tokens, tokens.length + CHUNK);
        byte[] longerHashes = ChunkHashes.of(new CacheKey("model", 1, CacheKey.NO_WORKER, longer, 0, longer.length, "l", "", 1, RequestConfigs.NONE), CHUNK,
                CHUNKS + 1);
        assertArrayEquals(whole, Arrays.copyOf(longerHashes, whole.length));
    }

    @Test
    void sha256CborChainIsUsedOnceConfigured() {
        try {
            ChunkHashes.use(() -> TokenHashChain.sha256Cbor("0"));
            byte[] direct = new byte[TokenHashChain.HASH_BYTES * CHUNKS];
            TokenHashChain.sha256Cbor("0").hashChunks(tokens, CHUNK, 0, CHUNKS, direct);
            assertArrayEquals(direct, ChunkHashes.of(key("", RequestTags.NONE, "r"), CHUNK, CHUNKS));
            assertEquals("sha256_cbor", ChunkHashes.algorithm());
        } finally {
            ChunkHashes.use(TokenHashChain::blake3);
        }
    }

    @Test
    void aLookupMeetsOnlyItsOwnSaltAndTagSet() {
        ObjectStore store = ReadyStores.lru(4L * CHUNKS * OBJECT_BYTES, 4L * CHUNKS * OBJECT_BYTES);
        storeAll(store, "salt-1", TENANT_A);
        storeAll(store, "", RequestTags.NONE);
        assertEquals(CHUNKS, hits(store, "salt-1", TENANT_A), "the same salt and tags hit");
        assertEquals(0, hits(store, "salt-2", TENANT_A), "another salt misses");
        assertEquals(0, hits(store, "salt-1", TENANT_B), "another tag value misses");
        assertEquals(0, hits(store, "salt-1", TENANT_A_V2), "a larger tag set misses");
        assertEquals(0, hits(store, "salt-1", RequestTags.NONE), "no tags miss a tagged entry");
        assertEquals(CHUNKS, hits(store, "", RequestTags.NONE), "the untagged, unsalted copy is its own entry");
        assertEquals(0, hits(store, "", TENANT_A));
        store.checkInvariants();
    }

    @Test
    void theL2NameFieldsAreLmcaches() {
        ChunkKey salted = new ChunkKey("m", "user-1", TENANT_A, 0, 0, new ChunkHash(1, 2, 3, 4));
        assertEquals("@user-1", salted.saltSuffix());
        assertEquals("", new ChunkKey("m", "", 0, 0, new ChunkHash(1, 2, 3, 4)).saltSuffix(), "no salt: no field");
        assertEquals("0000000000000001000000000000000200000000000000030000000000000004", salted.hash().hex());
        assertTrue(salted.hasTags());
    }

    private void storeAll(ObjectStore store, String salt, RequestTags tags) {
        byte[] hashes = ChunkHashes.of(key(salt, tags, "s"), CHUNK, CHUNKS);
        for (int c = 0; c < CHUNKS; c++) {
            StoredObject object = store.reserve(new ChunkKey("model", salt, tags, 0, 0, ChunkHash.unpack(hashes, c)), OBJECT_BYTES, 1);
            assertTrue(object.offset() >= 0);
            assertTrue(store.commit(object));
        }
    }

    private int hits(ObjectStore store, String salt, RequestTags tags) {
        PrefetchResults results = new PrefetchResults(TimeUnit.SECONDS.toNanos(60), System::nanoTime);
        LookupLeases leases = new LookupLeases(store, TimeUnit.SECONDS.toNanos(60), System::nanoTime);
        LookupModule module = new LookupModule(CHUNK, store, leases, results, new ServerMetrics(), new ObjectGroupCatalog(true));
        module.lookup(new Request.Lookup(key(salt, tags, "q"), 1));
        Reply reply = module.query("q");
        return reply instanceof Reply.Int n ? (int) n.value() : 0;
    }

    private CacheKey key(String salt, RequestTags tags, String requestId) {
        return new CacheKey("model", 1, CacheKey.NO_WORKER, tokens, 0, tokens.length, requestId, salt, 1, RequestConfigs.tagged(tags));
    }
}
