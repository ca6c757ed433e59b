package io.lmcache.server.tier.admission;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.lmcache.server.config.L2AdmissionSettings;
import io.lmcache.server.metrics.L2Metrics;
import io.lmcache.server.metrics.ServerMetrics;
import io.lmcache.server.storage.ChunkKey;
import io.lmcache.server.tier.admission.L2WriteGate.Decision;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/** The write-through's admission: {@code all}, the TinyLFU filter, and the tenants' write budgets, on their byte counters. */
class L2WriteGateTest {
    private static final long BYTES = 1000;
    private final ServerMetrics serverMetrics = new ServerMetrics();
    private final L2Metrics metrics = new L2Metrics(serverMetrics);
    private long nowNs;

    private L2WriteGate gate(int minSightings, long budget) {
        return new L2WriteGate(new L2AdmissionSettings(minSightings, budget), 1 << 14, metrics, () -> nowNs);
    }

    private static ChunkKey chunk(long i) {
        return ChunkKey.of("org/model", "", 0, 0, i, ~i);
    }

    private static ChunkKey chunk(long i, String salt, int rank) {
        return ChunkKey.of("org/model", salt, rank, 0, i, ~i);
    }

    @Test
    void allAdmitsEveryObjectAndCountsItsBytes() {
        L2WriteGate gate = gate(1, 0);
        for (int i = 0; i < 100; i++) {
            assertEquals(Decision.ADMITTED, gate.onCommit(chunk(i), BYTES));
            assertFalse(gate.onL1Hit(chunk(i), BYTES), "written at its commit");
        }
        assertEquals(100 * BYTES, metrics.admissionAdmittedBytes.sum());
        assertEquals(0, metrics.admissionSkippedBytes.sum());
        assertFalse(gate.countsLookups());
        assertTrue(serverMetrics.scrape().contains("lmcache_mp_l2_admission_bytes_total{decision=\"admitted\"} 100000.0"));
    }

    @Test
    void frequencyTurnsOneHitWondersAwayAndAdmitsTheNthSighting() {
        L2WriteGate gate = gate(3, 0);
        int admitted = 0;
        for (int i = 0; i < 5000; i++) {
            admitted += gate.onCommit(chunk(i), BYTES) == Decision.ADMITTED ? 1 : 0;
        }
        assertTrue(admitted < 50, "chunks seen once stay out (the sketch's collisions aside): " + admitted);
        assertEquals((5000L - admitted) * BYTES, metrics.admissionSkippedBytes.sum());
        gate = gate(3, 0); // an empty sketch: no collision with the keys above
        assertEquals(Decision.SKIPPED, gate.onCommit(chunk(-7), BYTES));
        assertEquals(Decision.SKIPPED, gate.onCommit(chunk(-7), BYTES));
        assertEquals(Decision.ADMITTED, gate.onCommit(chunk(-7), BYTES), "the third STORE of a chunk is written");
        assertEquals(Decision.ADMITTED, gate.onCommit(chunk(-7), BYTES));
        assertEquals((5000L - admitted + 2) * BYTES, metrics.admissionSkippedBytes.sum());
        assertEquals((admitted + 2L) * BYTES, metrics.admissionAdmittedBytes.sum());
    }

    @Test
    void theLookupSightingThatReachesNAdmitsOnceAndRanksAndSaltsCountApart() {
        L2WriteGate gate = gate(2, 0);
        assertTrue(gate.countsLookups());
        assertEquals(Decision.SKIPPED, gate.onCommit(chunk(1, "a", 0), BYTES));
        assertEquals(Decision.SKIPPED, gate.onCommit(chunk(1, "a", 1), BYTES), "another rank's object is another object");
        assertEquals(Decision.SKIPPED, gate.onCommit(chunk(1, "b", 0), BYTES), "another tenant's object is another object");
        assertTrue(gate.onL1Hit(chunk(1, "a", 0), BYTES), "its second sighting: written now");
        assertFalse(gate.onL1Hit(chunk(1, "a", 0), BYTES), "once");
        assertEquals(BYTES, metrics.admissionAdmittedOnLookupBytes.sum());
        assertEquals(0, metrics.admissionAdmittedBytes.sum());
    }

    @Test
    void aTenantPastItsBudgetIsDroppedCountedAndRefilledByTheClock() {
        L2WriteGate gate = gate(1, 2500); // a burst of 2500 bytes, then 2500 bytes a second
        assertEquals(Decision.ADMITTED, gate.onCommit(chunk(1, "a", 0), BYTES));
        assertEquals(Decision.ADMITTED, gate.onCommit(chunk(2, "a", 0), BYTES));
        assertEquals(Decision.BUDGET_DROPPED, gate.onCommit(chunk(3, "a", 0), BYTES));
        assertEquals(Decision.ADMITTED, gate.onCommit(chunk(3, "b", 0), BYTES), "another tenant has its own budget");
        nowNs += TimeUnit.MILLISECONDS.toNanos(200); // +500 bytes: 1000 in a's bucket
        assertEquals(Decision.ADMITTED, gate.onCommit(chunk(3, "a", 0), BYTES));
        assertEquals(Decision.BUDGET_DROPPED, gate.onCommit(chunk(4, "a", 0), BYTES));
        assertEquals(2 * BYTES, metrics.admissionBudgetDroppedBytes.sum());
        nowNs += TimeUnit.SECONDS.toNanos(10);
        assertEquals(Decision.ADMITTED, gate.onCommit(chunk(5, "a", 0), 10 * BYTES), "larger than the bucket: passes a full one");
        assertEquals(Decision.BUDGET_DROPPED, gate.onCommit(chunk(6, "a", 0), BYTES), "and leaves it empty");
    }

    @Test
    void budgetsAreKeptForABoundedNumberOfTenants() {
        WriteBudget budget = new WriteBudget(1000);
        for (int i = 0; i < 3 * WriteBudget.MAX_TENANTS; i++) {
            budget.take("tenant-" + i, 1, 0);
        }
        assertTrue(budget.tenants() <= WriteBudget.MAX_TENANTS + 1, "tenants past the bound share one bucket: " + budget.tenants());
    }

    @Test
    void theSketchAgesSoOldPopularityFades() {
        FrequencySketch sketch = new FrequencySketch(1024);
        for (int i = 0; i < 12; i++) {
            sketch.increment(42);
        }
        assertEquals(12, sketch.frequency(42));
        long i = 1_000_000;
        while (sketch.resets() == 0) {
            sketch.increment(i++);
        }
        assertTrue(sketch.frequency(42) <= 6, "halved and the doorkeeper cleared: " + sketch.frequency(42));
        assertEquals(0, new FrequencySketch(1024).frequency(42));
    }
}
