package io.lmcache.server.protocol;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/** The {@code lmcache.tag.*} entries of {@code request_configs} and the cache salt, by LMCache's rules (request_tags.rst, api.py). */
class RequestTagsTest {
    private final RequestDecoder decoder = new RequestDecoder();

    @Test
    void tagsAreTheLmcacheTagEntriesSortedWhateverTheMapOrder() throws Exception {
        Map<String, Object> configs = new LinkedHashMap<>();
        configs.put("lmcache.tag.tenant", "tenant-a");
        configs.put("lmcache.skip_save", true); // not identity: skipped, whatever its type
        configs.put("lmcache.tag.application_version", "v2");
        configs.put("lmcache.kv_ttl_s", 60);
        CacheKey key = lookupKey("", configs);
        assertEquals(List.of(new RequestTags.Tag("application_version", "v2"), new RequestTags.Tag("tenant", "tenant-a")), key.tags().tags());

        Map<String, Object> reversed = new LinkedHashMap<>();
        reversed.put("lmcache.tag.application_version", "v2");
        reversed.put("lmcache.tag.tenant", "tenant-a");
        assertEquals(key.tags(), lookupKey("", reversed).tags(), "map order does not matter");
        assertTrue(lookupKey("", null).tags().isEmpty(), "nil request_configs: no tags");
        assertTrue(lookupKey("", Map.of("lmcache.skip_save", "x")).tags().isEmpty());
    }

    @Test
    void distinctTagSetsHaveDistinctIdentities() {
        RequestTags a = RequestTags.of(List.of(new RequestTags.Tag("a", "b"), new RequestTags.Tag("c", "d")));
        RequestTags b = RequestTags.of(List.of(new RequestTags.Tag("a", "b%c"), new RequestTags.Tag("x", "y")));
        assertEquals("a%b%c%d", a.identity());
        assertNotEquals(a, RequestTags.of(List.of(new RequestTags.Tag("a", "b"))));
        assertNotEquals(a.identity(), RequestTags.NONE.identity());
        assertTrue(RequestTags.problem("tag value", "b%c") != null, "the separator is itself refused, so identities never collide");
        assertNotEquals(a, b);
    }

    @Test
    void tagsAreSortedByCodePointAsPythonSortsStrings() {
        // U+FF5E (one UTF-16 unit) sorts before U+1F600 (a surrogate pair) in Python; UTF-16 order would swap them
        RequestTags tags = RequestTags.of(List.of(new RequestTags.Tag("\uD83D\uDE00", "x"), new RequestTags.Tag("\uFF5E", "y")));
        assertEquals("\uFF5E", tags.tags().getFirst().name());
    }

    @Test
    void aTagLmcacheRefusesFailsTheRequest() {
        for (String bad : List.of("a@b", "a%b", "a/b", "a\\b", "a\0b", "x".repeat(129))) {
            assertEquals(ProtocolException.Reason.BAD_TAG, refused("", Map.of("lmcache.tag.t", bad)), "value " + bad);
            assertEquals(ProtocolException.Reason.BAD_TAG, refused("", Map.of("lmcache.tag." + bad, "v")), "name " + bad);
        }
        assertEquals(ProtocolException.Reason.BAD_TAG, refused("", Map.of("lmcache.tag.t", 5)), "the value must be a string");
        Map<String, Object> many = new LinkedHashMap<>();
        for (int i = 0; i <= RequestTags.MAX_TAGS; i++) {
            many.put("lmcache.tag.t" + i, "v");
        }
        assertEquals(ProtocolException.Reason.BAD_TAG, refused("", many));
        assertEquals("x".repeat(128), assertDoesNotRefuse(Map.of("lmcache.tag.t", "x".repeat(128))).tags().getFirst().value(), "128 is allowed");
        assertEquals("\uD83D\uDE00".repeat(128), assertDoesNotRefuse(Map.of("lmcache.tag.t", "\uD83D\uDE00".repeat(128))).tags().getFirst()
                .value(), "characters are code points, as Python's len");
    }

    @Test
    void aSaltLmcacheRefusesFailsTheRequest() throws Exception {
        for (String bad : List.of("a@b", "a/b", "a\\b", "a\0b", "s".repeat(129))) {
            assertEquals(ProtocolException.Reason.BAD_SALT, refused(bad, null), "salt " + bad);
        }
        assertEquals("tenant%1", lookupKey("tenant%1", null).cacheSalt(), "'%' is refused in tags only");
        assertEquals("s".repeat(128), lookupKey("s".repeat(128), null).cacheSalt());
    }

    private RequestTags assertDoesNotRefuse(Map<String, Object> configs) {
        try {
            return lookupKey("", configs).tags();
        } catch (ProtocolException e) {
            throw new AssertionError(e);
        }
    }

    private ProtocolException.Reason refused(String salt, Map<String, Object> configs) {
        return assertThrows(ProtocolException.class, () -> lookupKey(salt, configs)).reason();
    }

    private CacheKey lookupKey(String salt, Map<String, Object> configs) throws ProtocolException {
        byte[] key = RequestDecoderTest.pack(p -> {
            p.packMapHeader(4);
            p.packString("model_name").packString("m");
            p.packString("token_ids").packArrayHeader(2).packInt(1).packInt(2);
            p.packString("cache_salt").packString(salt);
            p.packString("request_configs");
            if (configs == null) {
                p.packNil();
                return;
            }
            p.packMapHeader(configs.size());
            for (Map.Entry<String, Object> e : configs.entrySet()) {
                p.packString(e.getKey());
                switch (e.getValue()) {
                    case String s -> p.packString(s);
                    case Integer i -> p.packInt(i);
                    case Boolean b -> p.packBoolean(b);
                    default -> throw new IllegalArgumentException();
                }
            }
        });
        byte[][] frames = {key, RequestDecoderTest.pack(p -> p.packInt(1))};
        return ((Request.Lookup) decoder.lookup(frames, 0, 2)).key();
    }
}
