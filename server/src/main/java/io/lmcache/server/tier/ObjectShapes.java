package io.lmcache.server.tier;

import io.lmcache.server.transfer.ObjectShape;
import java.util.List;
import java.util.Map;

/**
 * The object shapes (per object group: size and byte order) of a model that some worker has
 * registered, per world size: the one place an L2 load learns which object groups a key has and
 * how big its objects are, and an L2 store which world size (so which packed kv rank) wrote an
 * object. A hybrid registration answers one shape per object group.
 */
@FunctionalInterface
public interface ObjectShapes {
    /** Per world size some worker of {@code model} registered, its shapes (one registration's); empty when none is registered. */
    Map<Integer, List<ObjectShape>> byWorldSize(String model);

    /** Null when no worker of that model and world size is registered (then L2 is not asked). */
    default List<ObjectShape> shapes(String model, int worldSize) {
        return byWorldSize(model).get(worldSize);
    }

    /** {@link #worldSizeOf}'s answer when several registered world sizes have such an object. */
    int AMBIGUOUS = -1;

    /**
     * The world size whose registered workers write objects of this object group, size and format at kv rank {@code rank}: 0 when
     * none does, {@link #AMBIGUOUS} when several do (then the object's L2 key cannot be told).
     */
    default int worldSizeOf(String model, int rank, int group, long bytes, int format) {
        int found = 0;
        for (Map.Entry<Integer, List<ObjectShape>> entry : byWorldSize(model).entrySet()) {
            if (rank >= entry.getKey()) {
                continue;
            }
            for (ObjectShape shape : entry.getValue()) {
                if (shape.objectGroup() == group && shape.objectBytes() == bytes && shape.format() == format) {
                    if (found != 0) {
                        return AMBIGUOUS;
                    }
                    found = entry.getKey();
                    break;
                }
            }
        }
        return found;
    }
}
