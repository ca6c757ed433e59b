package io.lmcache.server.l2;

import com.fasterxml.jackson.databind.JsonNode;
import java.io.IOException;
import java.util.Map;
import java.util.concurrent.ThreadFactory;

/**
 * One kind of L2 adapter as a plug-in (Caffeine's {@code CacheSpec}/{@code CacheProvider} split): its name, how its JSON object is
 * read and checked, and how its I/O is opened. The asynchronous skeleton around the I/O ({@link AsyncL2Adapter}) is the same for
 * every type. Types are listed once, in {@code META-INF/services/io.lmcache.server.l2.L2AdapterType} ({@link L2AdapterTypes}):
 * a new type is its I/O class, its type class and that one line. An implementation has a public no-argument constructor.
 */
public interface L2AdapterType {
    /** The JSON {@code type} it answers for (e.g. {@code fs_native}). */
    String name();

    /**
     * Reads and checks one adapter object of this type; a bad value is refused with one line naming it. Pure: nothing is created
     * or touched.
     *
     * @param node the JSON object, its {@code type} being {@link #name}
     * @param env the process environment, for types that take overrides from it
     */
    L2AdapterSpec parse(JsonNode node, Map<String, String> env) throws L2SpecException;

    /**
     * Opens the I/O of a spec this type parsed, over the ledger of the adapter that will drive it.
     *
     * @param threads where its worker threads come from (the server names and owns them)
     * @throws IOException when its storage cannot be opened (a base_path that cannot be created, ...)
     */
    AdapterIo open(L2AdapterSpec spec, ThreadFactory threads, AdapterLedger ledger) throws IOException;
}
