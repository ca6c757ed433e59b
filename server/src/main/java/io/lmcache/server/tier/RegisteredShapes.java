package io.lmcache.server.tier;

import io.lmcache.server.transfer.ObjectShape;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CopyOnWriteArrayList;

/**
 * The object shapes the workers of every transfer module that is on registered: made before the L2 tier (which reads it on
 * lmcache-l2 and on the loads) and before the transfer modules, each of which the composition root adds as it builds it, the
 * lmcache-driven one first (for a world size both know, the first wins). So the L2 tier no longer needs the modules, and the
 * window commit, which writes through L2, reaches the lmcache-driven module through its constructor.
 */
public final class RegisteredShapes implements ObjectShapes {
    private final List<ObjectShapes> sources = new CopyOnWriteArrayList<>();

    /** A transfer module's registrations, asked after those added before it. */
    public void add(ObjectShapes source) {
        sources.add(source);
    }

    @Override
    public Map<Integer, List<ObjectShape>> byWorldSize(String model) {
        Map<Integer, List<ObjectShape>> merged = new LinkedHashMap<>();
        for (ObjectShapes source : sources) {
            source.byWorldSize(model).forEach(merged::putIfAbsent);
        }
        return merged;
    }
}
