package io.lmcache.server.protocol;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.util.List;
import org.msgpack.core.MessageBufferPacker;
import org.msgpack.core.MessagePack;

/**
 * Encodes {@link Reply} values into the msgpack frame the client's strict, typed decoder accepts
 * (protocol doc §3, §7.3). Not thread-safe: one encoder per thread, reused.
 */
public final class ReplyEncoder {
    private static final byte[] TRUE_FRAME = {(byte) 0xc3};
    private static final byte[] FALSE_FRAME = {(byte) 0xc2};

    private final MessageBufferPacker packer = MessagePack.newDefaultBufferPacker();
    /** The ints of one array, encoded here then written as one payload (5 bytes each at most); grown as needed. */
    private byte[] ints = new byte[5 * 256];

    /** The payload frame, or null when the reply is {@link Reply.None} (no frame is sent). */
    public byte[] encode(Reply reply) {
        if (reply instanceof Reply.None) {
            return null;
        }
        if (reply instanceof Reply.Bool(boolean value)) {
            return value ? TRUE_FRAME : FALSE_FRAME;
        }
        packer.clear();
        try {
            switch (reply) {
                case Reply.Int(long value) -> packer.packLong(value);
                case Reply.Str(String value) -> packer.packString(value);
                case Reply.StrList(List<String> values) -> {
                    packer.packArrayHeader(values.size());
                    for (String value : values) {
                        packer.packString(value);
                    }
                }
                case Reply.Transfer(byte[] event, boolean ok) -> {
                    packer.packArrayHeader(2);
                    packer.packBinaryHeader(event.length);
                    packer.writePayload(event);
                    packer.packBoolean(ok);
                }
                case Reply.LayerwisePool(int batch, List<byte[]> handles) -> {
                    packer.packArrayHeader(2);
                    packer.packInt(batch);
                    packer.packArrayHeader(handles.size());
                    for (byte[] handle : handles) {
                        packer.packBinaryHeader(handle.length);
                        packer.writePayload(handle);
                    }
                }
                case Reply.LayerwiseFrame(byte[] payload, boolean isFinal, boolean succeeded) -> {
                    packer.packArrayHeader(3);
                    packer.packBinaryHeader(payload.length);
                    packer.writePayload(payload);
                    packer.packBoolean(isFinal);
                    packer.packBoolean(succeeded);
                }
                case Reply.EnginePool(String shmName, long poolSize) -> {
                    packer.packMapHeader(2);
                    packer.packString("shm_name").packString(shmName);
                    packer.packString("pool_size").packLong(poolSize);
                }
                case Reply.PrepareStore(List<Reply.Slot> slots, int[] chunkIndices) -> {
                    packer.packMapHeader(1);
                    packer.packString("context");
                    packer.packMapHeader(2);
                    packer.packString("slots");
                    packSlots(slots);
                    packer.packString("chunk_indices");
                    packer.packArrayHeader(chunkIndices.length);
                    for (int index : chunkIndices) {
                        packer.packInt(index);
                    }
                }
                case Reply.PrepareRetrieve(boolean success, List<Reply.Slot> slots) -> {
                    packer.packMapHeader(3);
                    packer.packString("success").packBoolean(success);
                    packer.packString("data").packBinaryHeader(0);
                    packer.packString("context");
                    if (success) {
                        packer.packMapHeader(1);
                        packer.packString("slots");
                        packSlots(slots);
                    } else {
                        packer.packMapHeader(0);
                    }
                }
                case Reply.KvEvents events -> packKvEvents(events);
                case Reply.None none -> throw new IllegalStateException("handled above");
                case Reply.Bool bool -> throw new IllegalStateException("handled above");
            }
            return packer.toByteArray();
        } catch (IOException e) {
            throw new UncheckedIOException("in-memory msgpack packing cannot fail", e);
        }
    }

    /** A msgspec-encoded dataclass: a map keyed by field name, in declaration order (kv-events.md §3). */
    private void packKvEvents(Reply.KvEvents events) throws IOException {
        packKvEventsHeader(events.enabled(), events.incarnation(), events.nextCursor(), events.lost(), events.events().size());
        for (Reply.KvEventRecord record : events.events()) {
            packRecord(record);
        }
    }

    private void packKvEventsHeader(boolean enabled, long incarnation, long nextCursor, boolean lost, int records) throws IOException {
        packer.packMapHeader(5);
        packer.packString("enabled").packBoolean(enabled);
        packer.packString("incarnation").packLong(incarnation);
        packer.packString("next_cursor").packLong(nextCursor);
        packer.packString("lost").packBoolean(lost);
        packer.packString("events").packArrayHeader(records);
    }

    private void packRecord(Reply.KvEventRecord record) throws IOException {
        packer.packMapHeader(8);
        packer.packString("seq").packLong(record.seq());
        packer.packString("kind").packString(record.kind().wireName());
        packer.packString("medium").packString(record.medium());
        packer.packString("model_name").packString(record.modelName());
        packer.packString("block_hashes").packArrayHeader(record.blockHashes().size());
        for (byte[] hash : record.blockHashes()) {
            packer.packBinaryHeader(hash.length).writePayload(hash);
        }
        packer.packString("parent_block_hash");
        if (record.parentBlockHash() == null) {
            packer.packNil();
        } else {
            packer.packBinaryHeader(record.parentBlockHash().length).writePayload(record.parentBlockHash());
        }
        packer.packString("token_ids").packArrayHeader(record.tokenIds().length);
        packInts(record.tokenIds());
        // era A's field (kv-events.md §10.3): later decoders ignore it, era-A clients expect it
        packer.packString("block_size").packInt(record.blockSize());
    }

    /**
     * One KV-event record encoded alone, as {@link #encode} writes it inside a batch: a stream encodes each record once
     * and every subscriber's batch copies it ({@link #encodeKvEvents(boolean, long, long, boolean, List)}).
     */
    public byte[] encodeKvEventRecord(Reply.KvEventRecord record) {
        packer.clear();
        try {
            packRecord(record);
            return packer.toByteArray();
        } catch (IOException e) {
            throw new UncheckedIOException("in-memory msgpack packing cannot fail", e);
        }
    }

    /** A {@link Reply.KvEvents} batch of records encoded by {@link #encodeKvEventRecord}: byte for byte what {@link #encode} gives. */
    public byte[] encodeKvEvents(boolean enabled, long incarnation, long nextCursor, boolean lost, List<byte[]> records) {
        packer.clear();
        try {
            packKvEventsHeader(enabled, incarnation, nextCursor, lost, records.size());
            for (byte[] record : records) {
                packer.writePayload(record);
            }
            return packer.toByteArray();
        } catch (IOException e) {
            throw new UncheckedIOException("in-memory msgpack packing cannot fail", e);
        }
    }

    /**
     * The values of an int array, each as {@code MessagePacker.packInt} encodes it (the smallest of fixint, int8/16/32 and
     * uint8/16/32), written as one payload: a record's 256 tokens one {@code packInt} call each were ~70 % of the KV-event
     * streams' CPU (its buffer check per call; profile in bench/RESULTS.md#kv-event-subscribers).
     */
    private void packInts(int[] values) throws IOException {
        if (ints.length < 5 * values.length) {
            ints = new byte[5 * values.length];
        }
        int at = 0;
        for (int v : values) {
            at = putInt(ints, at, v);
        }
        packer.writePayload(ints, 0, at);
    }

    /** One int at {@code at}, msgpack's smallest encoding as {@code MessagePacker.packInt} chooses it; returns the end. */
    static int putInt(byte[] out, int at, int v) {
        if (v >= -32 && v < 128) {
            out[at] = (byte) v; // positive or negative fixint
            return at + 1;
        }
        if (v >= 0) {
            return v < 1 << 8 ? put(out, at, 0xcc, v, 1) : v < 1 << 16 ? put(out, at, 0xcd, v, 2) : put(out, at, 0xce, v, 4);
        }
        return v >= -(1 << 7) ? put(out, at, 0xd0, v, 1) : v >= -(1 << 15) ? put(out, at, 0xd1, v, 2) : put(out, at, 0xd2, v, 4);
    }

    /** {@code head}, then the low {@code bytes} bytes of {@code v}, big-endian. */
    private static int put(byte[] out, int at, int head, int v, int bytes) {
        out[at] = (byte) head;
        for (int i = 1; i <= bytes; i++) {
            out[at + i] = (byte) (v >>> (8 * (bytes - i)));
        }
        return at + 1 + bytes;
    }

    private void packSlots(List<Reply.Slot> slots) throws IOException {
        packer.packArrayHeader(slots.size());
        for (Reply.Slot slot : slots) {
            packer.packMapHeader(4);
            packer.packString("offset").packLong(slot.offset());
            packer.packString("length").packLong(slot.length());
            packer.packString("shape").packArrayHeader(slot.shape().length);
            for (int dim : slot.shape()) {
                packer.packInt(dim);
            }
            packer.packString("dtype").packString(slot.dtype());
        }
    }
}
