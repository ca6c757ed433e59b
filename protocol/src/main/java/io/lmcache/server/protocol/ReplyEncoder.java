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
        packer.packMapHeader(5);
        packer.packString("enabled").packBoolean(events.enabled());
        packer.packString("incarnation").packLong(events.incarnation());
        packer.packString("next_cursor").packLong(events.nextCursor());
        packer.packString("lost").packBoolean(events.lost());
        packer.packString("events").packArrayHeader(events.events().size());
        for (Reply.KvEventRecord record : events.events()) {
            packer.packMapHeader(8);
            packer.packString("seq").packLong(record.seq());
            packer.packString("kind").packString(record.kind());
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
            for (int token : record.tokenIds()) {
                packer.packInt(token);
            }
            // era A's field (kv-events.md §10.3): later decoders ignore it, era-A clients expect it
            packer.packString("block_size").packInt(record.blockSize());
        }
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
