package io.lmcache.server.metrics;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.HashSet;
import java.util.List;
import java.util.Set;
import org.junit.jupiter.api.Test;

/** The catalogues: one entry per name (a duplicate is refused), each spec well formed, the values of a meter checked. */
class CataloguesTest {
    /** Two catalogues that both declare lmcache_mp.twice. */
    private enum First implements CatalogueEntry {
        ONCE(MeterSpec.counter("lmcache_mp.once", "a name of its own")),
        TWICE(MeterSpec.counter("lmcache_mp.twice", "declared here"));

        private final MeterSpec spec;

        First(MeterSpec spec) {
            this.spec = spec;
        }

        @Override
        public MeterSpec spec() {
            return spec;
        }
    }

    private enum Second implements CatalogueEntry {
        TWICE(MeterSpec.gauge("lmcache_mp.twice", "and here, with another help"));

        private final MeterSpec spec;

        Second(MeterSpec spec) {
            this.spec = spec;
        }

        @Override
        public MeterSpec spec() {
            return spec;
        }
    }

    @Test
    void aNameDeclaredTwiceIsRefused() {
        assertEquals(2, Catalogues.refuseDuplicates(List.of(First.class)));
        IllegalStateException refused = assertThrows(IllegalStateException.class,
                () -> Catalogues.refuseDuplicates(List.of(First.class, Second.class)));
        assertEquals("metric lmcache_mp.twice is declared twice: First.TWICE and Second.TWICE", refused.getMessage());
    }

    @Test
    void theServersCataloguesLoadWithOneEntryPerName() {
        Set<String> names = new HashSet<>();
        for (CatalogueEntry entry : Catalogues.entries()) {
            assertTrue(names.add(entry.spec().name()), entry.spec().name());
            assertTrue(!entry.spec().help().isBlank(), entry + " has a help text");
        }
        assertEquals(names.size(), Catalogues.entryCount());
        assertTrue(names.size() > 100, "every meter of the server: " + names.size());
    }

    @Test
    void aMeterTakesOneValuePerLabelOfItsEntry() {
        ServerMetrics metrics = new ServerMetrics();
        assertThrows(IllegalArgumentException.class, () -> metrics.counter(TransferCatalogue.TRANSFER_FAILURES, "store"));
        assertThrows(IllegalArgumentException.class, () -> metrics.counter(L1Catalogue.OBJECTS), "a gauge is not a counter");
        assertThrows(IllegalArgumentException.class, () -> MeterSpec.counter("other.name", "not ours"));
        metrics.counter(TransferCatalogue.TRANSFER_FAILURES, "store", "test_reason").add(3);
        assertEquals(3, metrics.count("lmcache_mp.transfer_failures", "reason", "test_reason"));
    }
}
