package io.lmcache.server.tier;

import io.lmcache.server.transfer.ObjectShape;
import java.util.List;
import java.util.Objects;
import java.util.stream.Stream;

/**
 * The object shapes (per object group: size and byte order) of a model and world size that some
 * worker has registered: the one place an L2 load learns which object groups a key has and how
 * big its objects are. A hybrid registration answers one shape per object group.
 */
@FunctionalInterface
public interface ObjectShapes {
    /** Null when no worker of that model and world size is registered (then L2 is not asked). */
    List<ObjectShape> shapes(String model, int worldSize);

    /** The first of {@code sources} (nulls skipped: a transfer mode that is off) that knows the model. */
    static ObjectShapes firstOf(ObjectShapes... sources) {
        List<ObjectShapes> present = Stream.of(sources).filter(Objects::nonNull).toList();
        return (model, worldSize) -> {
            for (ObjectShapes source : present) {
                List<ObjectShape> shapes = source.shapes(model, worldSize);
                if (shapes != null) {
                    return shapes;
                }
            }
            return null;
        };
    }
}
