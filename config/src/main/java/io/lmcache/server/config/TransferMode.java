package io.lmcache.server.config;

/** Which transfer modules the server loads (`--supported-transfer-mode`). */
public enum TransferMode {
    /** Both: CUDA-IPC workers use LMCache-driven transfers, everyone else engine-driven. */
    AUTO("auto"),
    /** Only the server copies (CUDA IPC or CPU shared-memory tensors). */
    LMCACHE_DRIVEN("lmcache_driven"),
    /** Only the worker copies, into slots of the server's shared-memory pool. */
    ENGINE_DRIVEN("engine_driven");

    private final String flagValue;

    TransferMode(String flagValue) {
        this.flagValue = flagValue;
    }

    public String flagValue() {
        return flagValue;
    }

    public boolean allowsLmcacheDriven() {
        return this != ENGINE_DRIVEN;
    }

    public boolean allowsEngineDriven() {
        return this != LMCACHE_DRIVEN;
    }

    static TransferMode parse(String text) {
        for (TransferMode mode : values()) {
            if (mode.flagValue.equalsIgnoreCase(text)) {
                return mode;
            }
        }
        throw new IllegalArgumentException("must be one of auto, lmcache_driven, engine_driven");
    }
}
