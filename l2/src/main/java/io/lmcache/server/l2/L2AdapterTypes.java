package io.lmcache.server.l2;

import java.io.IOException;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.ServiceLoader;
import java.util.concurrent.ThreadFactory;

/**
 * The registry of adapter types: those listed in {@code META-INF/services/io.lmcache.server.l2.L2AdapterType}, in its order
 * (the order error messages name them in). Read through {@link ServiceLoader}, so this package never names the packages of the
 * types it lists (l2.redis depends on l2, never the other way). Two types of one name are refused at class load.
 */
public final class L2AdapterTypes {
    private static final Map<String, L2AdapterType> BY_NAME = load();

    private L2AdapterTypes() {}

    private static Map<String, L2AdapterType> load() {
        Map<String, L2AdapterType> types = new LinkedHashMap<>();
        for (L2AdapterType type : ServiceLoader.load(L2AdapterType.class, L2AdapterType.class.getClassLoader())) {
            if (types.putIfAbsent(type.name(), type) != null) {
                throw new IllegalStateException("two L2 adapter types are named " + type.name() + ": " + types.get(type.name()).getClass()
                        .getName() + " and " + type.getClass().getName());
            }
        }
        return Collections.unmodifiableMap(types);
    }

    /** The names of the types this server builds, in the registry's order. */
    public static List<String> names() {
        return List.copyOf(BY_NAME.keySet());
    }

    /** The type of this name, or null. */
    public static L2AdapterType find(String name) {
        return BY_NAME.get(name);
    }

    /** Opens the I/O of a parsed spec by its type (a decorator opens its inner adapter's this way). */
    public static AdapterIo open(L2AdapterSpec spec, ThreadFactory threads, AdapterLedger ledger) throws IOException {
        L2AdapterType type = find(spec.type());
        if (type == null) {
            throw new IllegalArgumentException("no L2 adapter type " + spec.type() + " (known: " + String.join(", ", names()) + ")");
        }
        return type.open(spec, threads, ledger);
    }
}
