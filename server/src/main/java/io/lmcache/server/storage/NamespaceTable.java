package io.lmcache.server.storage;

import io.lmcache.server.protocol.RequestTags;
import java.util.HashMap;
import java.util.Map;

/**
 * Interns (model name, cache salt, request tags) triples to small ints, counted by the objects that use them, so
 * keys stay compact and a pair vanishes with its last object (salts can be per tenant and are not
 * bounded). Guarded by the object store's lock, except {@link #peek}, which readers may call
 * under the same lock too.
 */
final class NamespaceTable {
    private record Name(String model, String salt, RequestTags tags) {}

    private final Map<Name, Integer> ids = new HashMap<>();
    private final Map<Integer, Name> names = new HashMap<>();
    private final Map<Integer, int[]> refs = new HashMap<>();
    /** Namespaces per cache salt: how many tenants hold objects now. */
    private final Map<String, int[]> salts = new HashMap<>();
    private int next = 1;

    /** The id of a pair, or 0 when no object of it exists (so nothing can hit). */
    int peek(String model, String salt, RequestTags tags) {
        Integer id = ids.get(new Name(model, salt, tags));
        return id == null ? 0 : id;
    }

    /** The id of a pair, created if needed; the caller then holds one reference. */
    int acquire(String model, String salt, RequestTags tags) {
        Name name = new Name(model, salt, tags);
        Integer id = ids.get(name);
        if (id == null) {
            id = next++;
            if (next == Integer.MAX_VALUE) {
                next = 1;
            }
            ids.put(name, id);
            names.put(id, name);
            refs.put(id, new int[1]);
            salts.computeIfAbsent(salt, k -> new int[1])[0]++;
        }
        refs.get(id)[0]++;
        return id;
    }

    void release(int id) {
        int[] count = refs.get(id);
        if (count != null && --count[0] == 0) {
            refs.remove(id);
            Name name = names.remove(id);
            ids.remove(name);
            int[] ofSalt = salts.get(name.salt());
            if (--ofSalt[0] == 0) {
                salts.remove(name.salt());
            }
        }
    }

    String model(int id) {
        Name name = names.get(id);
        return name == null ? "" : name.model();
    }

    String salt(int id) {
        Name name = names.get(id);
        return name == null ? "" : name.salt();
    }

    RequestTags tags(int id) {
        Name name = names.get(id);
        return name == null ? RequestTags.NONE : name.tags();
    }

    /** Distinct cache salts with objects now. */
    int saltCount() {
        return salts.size();
    }

    int size() {
        return ids.size();
    }
}
