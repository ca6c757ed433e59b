package io.lmcache.server.config;

/** `--device`: whether the server uses the CUDA driver for GPU workers. */
public enum DeviceMode {
    /** Use CUDA when a driver and a GPU are present, otherwise serve CPU workers only. */
    AUTO("auto"),
    /** Require CUDA; start-up fails when no driver or GPU is found. */
    CUDA("cuda"),
    /** Never touch the CUDA driver (CPU shared-memory workers only). */
    HOST("host");

    private final String flagValue;

    DeviceMode(String flagValue) {
        this.flagValue = flagValue;
    }

    public String flagValue() {
        return flagValue;
    }

    static DeviceMode parse(String text) {
        for (DeviceMode mode : values()) {
            if (mode.flagValue.equalsIgnoreCase(text)) {
                return mode;
            }
        }
        throw new IllegalArgumentException("must be one of auto, cuda, host");
    }
}
