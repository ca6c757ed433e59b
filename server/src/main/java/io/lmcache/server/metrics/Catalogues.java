package io.lmcache.server.metrics;

import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.stream.Stream;

/**
 * Every catalogue of the server's meters, and the check that no two entries share a name: it runs when this class loads
 * (with {@link ServerMetrics}), so a duplicate stops the server before a meter exists, as two meters of one name with
 * different help or labels would otherwise fail at their registration (or, worse, one would hide the other).
 */
public final class Catalogues {
    /** Each catalogue enum of this package; the architecture test holds this list against the sources. */
    public static final List<Class<? extends CatalogueEntry>> ALL = List.of(RequestCatalogue.class, ZeromqCatalogue.class,
            L1Catalogue.class, LivenessCatalogue.class, TransferCatalogue.class, LookupCatalogue.class, L2Catalogue.class,
            KvEventCatalogue.class, ServerCatalogue.class, FleetCatalogue.class, DiagnosticsCatalogue.class);

    private static final int ENTRIES = refuseDuplicates(ALL);

    private Catalogues() {}

    /** How many meters the catalogues declare (loading this class has checked them). */
    static int entryCount() {
        return ENTRIES;
    }

    /** Throws when two entries of {@code catalogues} have one name; returns the number of entries. */
    static int refuseDuplicates(List<Class<? extends CatalogueEntry>> catalogues) {
        Map<String, CatalogueEntry> byName = new HashMap<>();
        for (Class<? extends CatalogueEntry> catalogue : catalogues) {
            for (CatalogueEntry entry : catalogue.getEnumConstants()) {
                CatalogueEntry other = byName.putIfAbsent(entry.spec().name(), entry);
                if (other != null) {
                    throw new IllegalStateException("metric " + entry.spec().name() + " is declared twice: " + describe(other) + " and "
                            + describe(entry));
                }
            }
        }
        return byName.size();
    }

    /** Every entry (tests). */
    static List<CatalogueEntry> entries() {
        return ALL.stream().<CatalogueEntry>flatMap(c -> Stream.of(c.getEnumConstants())).toList();
    }

    private static String describe(CatalogueEntry entry) {
        return ((Enum<?>) entry).getDeclaringClass().getSimpleName() + "." + entry;
    }
}
