package io.lmcache.server.diag;

import io.lmcache.server.protocol.DType;
import io.lmcache.server.transfer.ObjectShape;
import java.util.ArrayList;
import java.util.List;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * LMCache's {@code MemoryLayoutDesc} as the lookup-hash line writes it: per object group of a registration, its dtype (torch's
 * name without {@code torch.}, the names LMCache's cache simulator reads, {@code lmcache/tools/cache_simulator/simulator.py}
 * {@code _DTYPE_BYTES}) and its shape for one chunk. The shape is {@code [planes, layers, tokens, heads x head size]} from the
 * object's recorded format; where that is not known (an engine-driven registration), one dimension of the chunk's element count.
 * The simulator multiplies the shape by the dtype's size, so both give a chunk's bytes.
 */
record LayoutDesc(List<String> dtypes, List<List<Long>> shapes) {
    static final LayoutDesc UNKNOWN = new LayoutDesc(List.of(), List.of());
    /** {@code KvLayout.segmentFormat}: {@code dtype[planes,layers,tokens,heads x head size]} and optional words after it. */
    private static final Pattern FORMAT = Pattern.compile("^(\\w+)\\[(\\d+),(\\d+),(\\d+),(\\d+)x(\\d+)]");

    /** The description of a registration's object shapes; {@link #UNKNOWN} (empty lists) when none is registered. */
    static LayoutDesc of(List<ObjectShape> shapes) {
        if (shapes == null || shapes.isEmpty()) {
            return UNKNOWN;
        }
        List<String> dtypes = new ArrayList<>();
        List<List<Long>> dims = new ArrayList<>();
        for (ObjectShape shape : shapes) {
            Matcher format = FORMAT.matcher(shape.l2Layout());
            if (format.find() && DType.fromTorchName(format.group(1)) != null) {
                dtypes.add(format.group(1));
                dims.add(List.of(Long.parseLong(format.group(2)), Long.parseLong(format.group(3)), Long.parseLong(format.group(4)),
                        Long.parseLong(format.group(5)) * Long.parseLong(format.group(6))));
                continue;
            }
            DType dtype = dtypeOf(shape.format());
            if (dtype != null) {
                dtypes.add(dtype.torchName());
                dims.add(List.of(shape.objectBytes() / dtype.elementSize()));
            }
        }
        return new LayoutDesc(List.copyOf(dtypes), List.copyOf(dims));
    }

    /** The dtype a format's top byte names ({@code KvLayout.dtypeBits}: ordinal + 1), or null. */
    static DType dtypeOf(int format) {
        int ordinal = (format >>> 24) - 1;
        return ordinal >= 0 && ordinal < DType.values().length ? DType.values()[ordinal] : null;
    }
}
