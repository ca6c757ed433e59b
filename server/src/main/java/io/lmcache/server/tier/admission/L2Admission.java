package io.lmcache.server.tier.admission;

import io.lmcache.server.config.L2AdmissionSettings;

/**
 * Whether a committed object is worth an L2 write ({@code --l2-admission}), in the style of the eviction policies: one sealed
 * seam, one class per policy. Keys are 64-bit digests of an object's identity ({@link L2WriteGate#objectKey}). Called by its one
 * owner ({@link L2WriteGate}) under that owner's lock.
 */
sealed interface L2Admission permits L2Admission.All, L2Admission.Frequency {
    static L2Admission create(L2AdmissionSettings settings, int expectedKeys) {
        return settings.admitsAll() ? new All() : new Frequency(settings.minSightings(), expectedKeys);
    }

    /** The {@code --l2-admission} value. */
    String flagValue();

    /** A STORE committed the object: one sighting; true when it is to be written now. */
    boolean onCommit(long key);

    /**
     * A LOOKUP found the object in L1: one sighting; true when this sighting is the one that makes it admissible (the STORE that
     * committed it was turned away, so it is written now, while it is still in L1).
     */
    boolean onL1Hit(long key);

    /** Today's behaviour: every committed object is written, nothing is counted. */
    record All() implements L2Admission {
        @Override
        public String flagValue() {
            return "all";
        }

        @Override
        public boolean onCommit(long key) {
            return true;
        }

        @Override
        public boolean onL1Hit(long key) {
            return false; // written at its commit already
        }
    }

    /** {@code frequency:N}: an object once it has been seen N times (STOREs and LOOKUP hits), TinyLFU's sketch. */
    final class Frequency implements L2Admission {
        private final int minSightings;
        private final FrequencySketch sketch;

        Frequency(int minSightings, int expectedKeys) {
            this.minSightings = minSightings;
            this.sketch = new FrequencySketch(expectedKeys);
        }

        @Override
        public String flagValue() {
            return "frequency:" + minSightings;
        }

        @Override
        public boolean onCommit(long key) {
            sketch.increment(key);
            return sketch.frequency(key) >= minSightings;
        }

        @Override
        public boolean onL1Hit(long key) {
            int before = sketch.frequency(key);
            sketch.increment(key);
            return before < minSightings && sketch.frequency(key) >= minSightings;
        }

        long resets() {
            return sketch.resets();
        }
    }
}
