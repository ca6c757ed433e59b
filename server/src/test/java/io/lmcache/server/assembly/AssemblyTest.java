package io.lmcache.server.assembly;

import static io.lmcache.server.assembly.Part.after;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/** The assembly on made-up parts: dependency order, parts that are off, the frozen wiring, and the close order. */
class AssemblyTest {
    private final List<String> events = new ArrayList<>();

    private record Store(String name) {}

    private record Cache(Store store) {}

    private Part<Store> store() {
        return Part.of("store", List.of(), b -> {
            b.onClose("store", () -> events.add("close store"));
            b.onStart("store", () -> events.add("start store"));
            return new Store("s");
        });
    }

    private Part<Cache> cache() {
        return Part.of("cache", List.of(after("store", "it caches the store")), b -> {
            Cache cache = new Cache(b.require(Store.class));
            b.onClose("cache", () -> events.add("close cache"));
            b.onServe("cache", () -> events.add("serve cache"));
            b.onStart("cache", () -> events.add("start cache"));
            b.status("cache", () -> Map.of("store", cache.store().name()));
            return cache;
        });
    }

    private static Part<Object> off() {
        return Part.of("off", List.of(), b -> null);
    }

    @Test
    void opensInDependencyOrderStartsThenServesAndClosesInReverse() {
        Assembly assembly = Assembly.open(List.of(cache(), off(), store())).conclude();
        assertEquals(List.of("store", "cache"), assembly.opened());
        assertEquals(List.of("off"), assembly.off());
        assembly.start();
        assertEquals(Map.of("cache", Map.of("store", "s")), assembly.status());
        assertEquals(List.of("cache", "store"), assembly.closeOrder());
        assembly.close();
        assembly.close();
        assertEquals(List.of("start store", "start cache", "serve cache", "close cache", "close store"), events);
    }

    @Test
    void aPartThatFailsClosesWhatWasOpenedAndAMissingPartIsNamed() {
        Part<Object> broken = Part.of("broken", List.of(after("store", "")), b -> b.require(Cache.class));
        IllegalStateException e = assertThrows(IllegalStateException.class, () -> Assembly.open(List.of(store(), broken)));
        assertEquals(List.of("close store"), events);
        assertEquals(true, e.getMessage().contains("Cache"));
    }

    @Test
    void anOffPartIsOptionalAndNoWiringHappensAfterConclude() {
        Build[] kept = new Build[1];
        Part<Object> asks = Part.of("asks", List.of(after("off", "")), b -> {
            kept[0] = b;
            assertNull(b.optional(Cache.class));
            return "asked";
        });
        Assembly.open(List.of(off(), asks)).conclude();
        assertThrows(IllegalStateException.class, () -> kept[0].onClose("late", () -> { }));
        assertThrows(IllegalStateException.class, () -> kept[0].require(Store.class));
    }

    @Test
    void aCircleOfEdgesOrTwoPartsOfOneNameAreRefused() {
        Part<Object> a = Part.of("a", List.of(after("b", "")), b -> "a");
        Part<Object> b = Part.of("b", List.of(after("a", "")), x -> "b");
        assertThrows(IllegalArgumentException.class, () -> Assembly.order(List.of(a, b)));
        assertThrows(IllegalArgumentException.class, () -> Assembly.order(List.of(store(), store())));
    }
}
