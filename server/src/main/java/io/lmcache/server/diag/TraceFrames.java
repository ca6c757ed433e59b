package io.lmcache.server.diag;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.msgpack.core.MessageBufferPacker;
import org.msgpack.core.MessagePack;

/**
 * LMCache's trace file format ({@code lmcache/v1/mp_observability/trace/format.py@7f2a2f42}): frames of a 4-byte big-endian length
 * and a msgpack body; the first frame a {@code Header}, then {@code Record}s, both msgspec tagged structs (a map whose
 * {@code "type"} is {@code "header"} or {@code "record"}, fields in declaration order, defaults omitted). Values are encoded as
 * msgpack's own types (LMCache's codecs pass JSON-like values through, {@code trace/codecs.py}): maps, lists, strings, integers,
 * floats as float64, booleans, nil, and bytes as bin.
 */
final class TraceFrames {
    static final byte[] MAGIC = "LMCT".getBytes(StandardCharsets.US_ASCII);
    static final int FORMAT_VERSION = 1;
    /** {@code TRACE_SCHEMA_VERSION} of format.py@7f2a2f42 (version 2 added {@code ObjectKey.cache_salt}). */
    static final int TRACE_SCHEMA_VERSION = 2;

    private TraceFrames() {}

    /** The header frame's body; {@code levelMeta} empty is omitted (msgspec's omit_defaults). */
    static byte[] header(String level, double tMonoStart, double tWallStart, Map<String, Object> levelMeta) {
        Map<String, Object> header = new LinkedHashMap<>();
        header.put("type", "header");
        header.put("magic", MAGIC);
        header.put("format_version", FORMAT_VERSION);
        header.put("level", level);
        header.put("trace_schema_version", TRACE_SCHEMA_VERSION);
        header.put("t_mono_start", tMonoStart);
        header.put("t_wall_start", tWallStart);
        // LMCache writes its StorageManagerConfig here when it has one, else "" (the recorder's fallback header): there is none here
        header.put("sm_config_json", "");
        header.put("sm_config_digest", "");
        if (!levelMeta.isEmpty()) {
            header.put("level_meta", levelMeta);
        }
        return pack(header);
    }

    /** A record frame's body: {@code tMono} seconds since the header's {@code t_mono_start}. */
    static byte[] record(double tMono, double tWall, String qualname, Map<String, Object> args) {
        Map<String, Object> record = new LinkedHashMap<>();
        record.put("type", "record");
        record.put("t_mono", tMono);
        record.put("t_wall", tWall);
        record.put("qualname", qualname);
        record.put("args", args);
        return pack(record);
    }

    static byte[] pack(Object value) {
        try (MessageBufferPacker packer = MessagePack.newDefaultBufferPacker()) {
            write(packer, value);
            return packer.toByteArray();
        } catch (IOException e) {
            throw new IllegalStateException("msgpack into memory failed", e);
        }
    }

    private static void write(MessageBufferPacker packer, Object value) throws IOException {
        switch (value) {
            case null -> packer.packNil();
            case String s -> packer.packString(s);
            case Boolean b -> packer.packBoolean(b);
            case Double d -> packer.packDouble(d);
            case Float f -> packer.packDouble(f);
            case Number n -> packer.packLong(n.longValue());
            case byte[] bytes -> {
                packer.packBinaryHeader(bytes.length);
                packer.writePayload(bytes);
            }
            case Map<?, ?> map -> {
                packer.packMapHeader(map.size());
                for (Map.Entry<?, ?> entry : map.entrySet()) {
                    packer.packString(String.valueOf(entry.getKey()));
                    write(packer, entry.getValue());
                }
            }
            case List<?> list -> {
                packer.packArrayHeader(list.size());
                for (Object item : list) {
                    write(packer, item);
                }
            }
            default -> throw new IllegalArgumentException("no msgpack form for " + value.getClass().getName());
        }
    }
}
