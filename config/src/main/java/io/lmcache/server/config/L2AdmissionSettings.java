package io.lmcache.server.config;

/**
 * Which committed objects the L2 write-through sends at all ({@code --l2-admission}, {@code --l2-write-budget-bytes-per-second}).
 *
 * @param minSightings 1: every object ({@code all}, LMCache's behaviour); N >= 2: an object once its chunk was seen N times
 *     ({@code frequency:N})
 * @param writeBudgetBytesPerSecond each tenant's (cache salt's) L2 write rate; 0: no budget
 */
public record L2AdmissionSettings(int minSightings, long writeBudgetBytesPerSecond) {
    /** The largest N: the sketch's counters have 4 bits (the doorkeeper adds one sighting). */
    public static final int MAX_SIGHTINGS = 15;
    public static final L2AdmissionSettings ALL = new L2AdmissionSettings(1, 0);

    public L2AdmissionSettings {
        if (minSightings < 1 || minSightings > MAX_SIGHTINGS || writeBudgetBytesPerSecond < 0) {
            throw new IllegalArgumentException("minSightings " + minSightings + ", budget " + writeBudgetBytesPerSecond);
        }
    }

    /** The {@code --l2-admission} value. */
    public String flagValue() {
        return minSightings == 1 ? "all" : "frequency:" + minSightings;
    }

    public boolean admitsAll() {
        return minSightings == 1;
    }
}
