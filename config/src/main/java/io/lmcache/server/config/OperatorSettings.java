package io.lmcache.server.config;

import java.util.List;
import java.util.Locale;

/**
 * What operators set beyond LMCache's core flags: the pool file's mode, the sampling of the chunk
 * lifecycle histograms, and the instance label every metric carries.
 *
 * @param shmMode the pool segment's permission bits ({@code --shm-mode}), or -1 for the default
 *     (0666 less the process's umask)
 * @param metricsSampleRate the fraction of chunks whose lifecycle (lifetime, idle time, reuse gaps)
 *     is recorded, in (0, 1]; counters always count everything
 * @param serviceInstanceId the {@code service_instance_id} label on every metric and {@code target_info}
 */
public record OperatorSettings(int shmMode, double metricsSampleRate, String serviceInstanceId) {
    /** Without {@code --shm-mode}: the pool file keeps the mode the process's umask gives it. */
    public static final int DEFAULT_SHM_MODE = -1;

    /** The defaults (tests). */
    public static OperatorSettings defaults(String instanceId) {
        return new OperatorSettings(DEFAULT_SHM_MODE, 0.01, instanceId);
    }

    static OperatorSettings validate(String shmMode, String sampleRate, String serviceInstanceId, List<String> warnings)
            throws ConfigException {
        int mode = DEFAULT_SHM_MODE;
        if (shmMode != null) {
            String text = shmMode.strip();
            if (!text.matches("0?[0-7]{3}")) {
                throw new ConfigException("--shm-mode", "must be octal permission bits such as 0660, got '" + shmMode + "'");
            }
            mode = Integer.parseInt(text, 8);
            if ((mode & 0600) != 0600 || (mode & 0111) != 0) {
                throw new ConfigException("--shm-mode", "must let the owner read and write and nobody execute (e.g. 0600, 0660), got " + text);
            }
            if ((mode & 0002) != 0) {
                warnings.add("--shm-mode " + text + ": every local user can write the L1 pool; prefer 0660 and a shared group");
            }
        }
        double rate;
        try {
            rate = Double.parseDouble(sampleRate.strip());
        } catch (NumberFormatException e) {
            throw new ConfigException("--metrics-sample-rate", "must be a number in (0, 1], got '" + sampleRate + "'");
        }
        if (!(rate > 0) || rate > 1) {
            throw new ConfigException("--metrics-sample-rate", "must be in (0, 1], got " + sampleRate.strip());
        }
        return new OperatorSettings(mode, rate, serviceInstanceId.strip());
    }

    /** The mode as {@code /config} shows it ("" when unset). */
    public String shmModeText() {
        return shmMode == DEFAULT_SHM_MODE ? "" : String.format(Locale.ROOT, "0%o", shmMode);
    }
}
