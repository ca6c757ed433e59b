package io.lmcache.server.protocol;

import java.util.HashMap;
import java.util.Map;

/** The torch dtypes a KV cache can use, by their torch attribute name, with the element size. */
public enum DType {
    BFLOAT16("bfloat16", 2),
    FLOAT16("float16", 2),
    FLOAT32("float32", 4),
    FLOAT64("float64", 8),
    FLOAT8_E4M3FN("float8_e4m3fn", 1),
    FLOAT8_E4M3FNUZ("float8_e4m3fnuz", 1),
    FLOAT8_E5M2("float8_e5m2", 1),
    FLOAT8_E5M2FNUZ("float8_e5m2fnuz", 1),
    UINT8("uint8", 1),
    INT8("int8", 1),
    INT16("int16", 2),
    INT32("int32", 4),
    INT64("int64", 8);

    private static final Map<String, DType> BY_NAME = new HashMap<>();

    static {
        for (DType dtype : values()) {
            BY_NAME.put(dtype.torchName, dtype);
        }
        // torch's aliases pickle under their canonical names, but clients may send the alias as a string
        BY_NAME.put("half", FLOAT16);
        BY_NAME.put("float", FLOAT32);
        BY_NAME.put("double", FLOAT64);
    }

    private final String torchName;
    private final int elementSize;

    DType(String torchName, int elementSize) {
        this.torchName = torchName;
        this.elementSize = elementSize;
    }

    public String torchName() {
        return torchName;
    }

    public int elementSize() {
        return elementSize;
    }

    /** The dtype for a torch attribute name (with or without the {@code torch.} prefix), or null. */
    public static DType fromTorchName(String name) {
        String bare = name.startsWith("torch.") ? name.substring(6) : name;
        return BY_NAME.get(bare);
    }
}
