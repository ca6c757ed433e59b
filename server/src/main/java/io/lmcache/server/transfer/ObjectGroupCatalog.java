package io.lmcache.server.transfer;

import io.lmcache.server.tables.WireKey;
import java.util.concurrent.ConcurrentHashMap;

/**
 * The object groups of the registered models, by (model name, world size) as LMCache's layout
 * registry keys them: REGISTER publishes them, LOOKUP (whose key names no instance) reads them to
 * know which groups and windows a hit needs. Also holds how kernel groups are bucketed
 * ({@code --separate-object-groups}). Thread-safe; the last registration of a model wins.
 */
public final class ObjectGroupCatalog {
    /** Distinct models remembered; more are served as non-hybrid (bounded: model names come from the wire). */
    static final int MAX_MODELS = 4096;

    /** Keyed by the model name's {@link WireKey} form: 4096 megabyte names are not kept. */
    private record Model(String name, int worldSize) {
        Model {
            name = WireKey.of(name);
        }
    }

    private final boolean separateObjectGroups;
    private final ConcurrentHashMap<Model, LookupGeometry> models = new ConcurrentHashMap<>();

    public ObjectGroupCatalog(boolean separateObjectGroups) {
        this.separateObjectGroups = separateObjectGroups;
    }

    public boolean separateObjectGroups() {
        return separateObjectGroups;
    }

    /** Records a registered model's lookup geometry; a non-hybrid one is the default and is only dropped. */
    public void publish(String modelName, int worldSize, LookupGeometry geometry) {
        Model model = new Model(modelName, worldSize);
        if (geometry.plain()) {
            models.remove(model);
        } else if (models.size() < MAX_MODELS || models.containsKey(model)) {
            models.put(model, geometry);
        }
    }

    /** The geometry a LOOKUP of the model uses: {@link LookupGeometry#SINGLE} unless a hybrid registration published one. */
    public LookupGeometry lookupGeometry(String modelName, int worldSize) {
        if (models.isEmpty()) {
            return LookupGeometry.SINGLE;
        }
        return models.getOrDefault(new Model(modelName, worldSize), LookupGeometry.SINGLE);
    }
}
