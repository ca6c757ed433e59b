package io.lmcache.server.config;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.reflect.RecordComponent;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/** The {@code -Dlmcache.*} knobs: one property per component, the former defaults, and a bad value refused by name. */
class TuningTest {
    private static Tuning with(Map<String, String> properties, int cores) throws ConfigException {
        return Tuning.from(properties::get, cores);
    }

    @Test
    void everyComponentHasItsPropertyAndDescribeShowsEachOnce() {
        RecordComponent[] components = Tuning.class.getRecordComponents();
        assertEquals(components.length, Tuning.PROPERTIES.size(), "one property per component, in component order");
        Map<String, Object> described = Tuning.defaults().describe();
        assertEquals(Tuning.PROPERTIES, List.copyOf(described.keySet()));
        assertTrue(Tuning.PROPERTIES.stream().allMatch(name -> name.startsWith("lmcache.")), Tuning.PROPERTIES.toString());
    }

    @Test
    void theDefaultsAreTheOnesTheOwnersHadBeforeTheRecord() throws ConfigException {
        Tuning small = with(Map.of(), 2);
        assertEquals(new Tuning(8, 32L << 20, 2048L << 10, 16384L << 10, 128L << 10, 256L << 10, 2, true, true, true, 16, false, 0, 1024L << 10,
                true, 0, 256), small);
        assertEquals(TimeUnit.MICROSECONDS.toNanos(Tuning.BIG_HOST_SPIN_US), with(Map.of(), Tuning.SPIN_MIN_CORES).transferSpinNs(),
                "hosts with cores to spare spin");
        assertEquals(small, Tuning.defaults());
    }

    @Test
    void givenValuesAreReadInTheirPropertysUnit() throws ConfigException {
        Map<String, String> given = new HashMap<>();
        given.put("lmcache.cuda.stagingMiB", "64");
        given.put("lmcache.cuda.dmaHeadKiB", "0");
        given.put("lmcache.cuda.hostFnWake", "false");
        given.put("lmcache.transfer.spinUs", " 1000000 ");
        given.put("lmcache.l1.prepareThreads", "3");
        given.put("lmcache.transfer.hostRunKiB", "256");
        given.put("lmcache.transfer.nativeCopy", "FALSE");
        given.put("lmcache.cuda.storeDmaHeadMinPieceKiB", "64");
        given.put("lmcache.cuda.retrieveDmaHeadMinPieceKiB", "512");
        given.put("lmcache.cuda.stageInPoolOrder", " True ");
        Tuning tuning = with(given, 64);
        assertEquals(64L << 20, tuning.stagingHalfBytes());
        assertEquals(0, tuning.dmaHeadBytes());
        assertFalse(tuning.hostFnWake());
        assertEquals(TimeUnit.SECONDS.toNanos(1), tuning.transferSpinNs());
        assertEquals(3, tuning.prepareThreads());
        assertEquals(256L << 10, tuning.hostRunBytes());
        assertFalse(tuning.nativeHostCopy());
        assertEquals(64L << 10, tuning.storeDmaHeadMinPieceBytes(), "each direction its own threshold");
        assertEquals(512L << 10, tuning.retrieveDmaHeadMinPieceBytes());
        assertTrue(tuning.stageInPoolOrder(), "a flag whose default is off reads on");
        assertEquals(true, tuning.describe().get("lmcache.cuda.stageInPoolOrder"));
        assertEquals(64L, tuning.describe().get("lmcache.cuda.stagingMiB"));
        assertEquals(1_000_000L, tuning.describe().get("lmcache.transfer.spinUs"));
    }

    @Test
    void aRetiredPropertyIsRefusedNamingWhatReplacedIt() {
        ConfigException refused = assertThrows(ConfigException.class, () -> with(Map.of("lmcache.cuda.dmaHeadMinPieceKiB", "128"), 2));
        assertTrue(refused.getMessage().startsWith("-Dlmcache.cuda.dmaHeadMinPieceKiB: is no longer read: set "), refused.getMessage());
        assertTrue(refused.getMessage().contains("lmcache.cuda.storeDmaHeadMinPieceKiB"), refused.getMessage());
        assertTrue(refused.getMessage().contains("lmcache.cuda.retrieveDmaHeadMinPieceKiB"), refused.getMessage());
    }

    @Test
    void aBadValueOfAnyKnobIsRefusedNamingItsProperty() {
        for (String property : Tuning.PROPERTIES) {
            for (String bad : List.of("many", "-1", "99999999999999999999")) {
                ConfigException refused = assertThrows(ConfigException.class, () -> with(Map.of(property, bad), 2), property + "=" + bad);
                assertTrue(refused.getMessage().startsWith("-D" + property + ": must be "), refused.getMessage());
            }
        }
        assertThrows(ConfigException.class, () -> with(Map.of("lmcache.cuda.copyBlocks", "0"), 2), "below the range");
        assertThrows(ConfigException.class, () -> with(Map.of("lmcache.cuda.batchGrowth", "1"), 2), "no growth");
        assertThrows(ConfigException.class, () -> with(Map.of("lmcache.cuda.firstBatchKiB", "4"), 2), "under 64 KiB");
    }
}
