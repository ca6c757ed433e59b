package io.lmcache.server.tier;

import static org.junit.jupiter.api.Assertions.assertEquals;

import io.lmcache.server.transfer.ObjectShape;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/** The registry the L2 tier reads before the transfer modules exist: it sees the modules added later, the first added winning. */
class RegisteredShapesTest {
    private static final ObjectShape LMCACHE_DRIVEN = new ObjectShape(0, 4096, 0);
    private static final ObjectShape ENGINE_DRIVEN = new ObjectShape(0, 8192, 0);

    @Test
    void sourcesAddedAfterTheReaderWasGivenTheRegistryAreSeenAndTheFirstWinsAWorldSize() {
        RegisteredShapes shapes = new RegisteredShapes();
        ObjectShapes reader = shapes; // what the L2 tier holds from its opening on
        assertEquals(Map.of(), reader.byWorldSize("m"));
        shapes.add(model -> model.equals("m") ? Map.of(1, List.of(LMCACHE_DRIVEN)) : Map.of());
        shapes.add(model -> Map.of(1, List.of(ENGINE_DRIVEN), 2, List.of(ENGINE_DRIVEN)));
        assertEquals(List.of(LMCACHE_DRIVEN), reader.shapes("m", 1));
        assertEquals(List.of(ENGINE_DRIVEN), reader.shapes("m", 2));
        assertEquals(List.of(ENGINE_DRIVEN), reader.shapes("other", 1));
    }
}
