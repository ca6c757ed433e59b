package io.lmcache.server.testing;

import java.io.DataInputStream;
import java.io.EOFException;
import java.io.IOException;
import java.io.InputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.msgpack.core.MessagePack;
import org.msgpack.core.MessageUnpacker;
import org.msgpack.value.Value;

/**
 * A reader of LMCache's trace files written from its {@code TraceReader} ({@code lmcache/v1/mp_observability/trace/reader.py}):
 * {@code [uint32 BE length][msgpack]} frames, the first the header (its magic and format version checked), a truncated tail
 * tolerated. Values come back as plain Java: maps, lists, strings, longs, doubles, booleans, byte arrays.
 */
public record TraceFile(Map<String, Object> header, List<Map<String, Object>> records) {

    public static TraceFile read(Path path) throws IOException {
        List<Map<String, Object>> frames = new ArrayList<>();
        try (InputStream file = Files.newInputStream(path); DataInputStream in = new DataInputStream(file)) {
            while (true) {
                int length;
                try {
                    length = in.readInt();
                } catch (EOFException e) {
                    break;
                }
                byte[] body = in.readNBytes(length);
                if (body.length < length) {
                    break; // a truncated tail, as LMCache's reader
                }
                frames.add(decodeMap(body));
            }
        }
        if (frames.isEmpty()) {
            throw new IOException(path + ": empty trace");
        }
        Map<String, Object> header = frames.getFirst();
        if (!"header".equals(header.get("type")) || !Arrays.equals("LMCT".getBytes(), (byte[]) header.get("magic"))
                || !Long.valueOf(1).equals(header.get("format_version"))) {
            throw new IOException(path + ": not an LMCache trace: " + header);
        }
        return new TraceFile(header, List.copyOf(frames.subList(1, frames.size())));
    }

    /** The records of one qualname, their args. */
    public List<Map<String, Object>> args(String qualname) {
        return records.stream().filter(r -> qualname.equals(r.get("qualname"))).map(TraceFile::args).toList();
    }

    @SuppressWarnings("unchecked")
    public static Map<String, Object> args(Map<String, Object> record) {
        return (Map<String, Object>) record.get("args");
    }

    @SuppressWarnings("unchecked")
    static Map<String, Object> decodeMap(byte[] body) throws IOException {
        try (MessageUnpacker unpacker = MessagePack.newDefaultUnpacker(body)) {
            return (Map<String, Object>) plain(unpacker.unpackValue());
        }
    }

    private static Object plain(Value value) {
        return switch (value.getValueType()) {
            case NIL -> null;
            case BOOLEAN -> value.asBooleanValue().getBoolean();
            case INTEGER -> value.asIntegerValue().toLong();
            case FLOAT -> value.asFloatValue().toDouble();
            case STRING -> value.asStringValue().asString();
            case BINARY -> value.asBinaryValue().asByteArray();
            case ARRAY -> value.asArrayValue().list().stream().map(TraceFile::plain).toList();
            case MAP -> {
                Map<String, Object> map = new LinkedHashMap<>();
                value.asMapValue().entrySet().forEach(e -> map.put(e.getKey().asStringValue().asString(), plain(e.getValue())));
                yield map;
            }
            case EXTENSION -> throw new IllegalArgumentException("no extension types in a trace");
        };
    }
}
