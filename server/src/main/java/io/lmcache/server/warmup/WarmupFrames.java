package io.lmcache.server.warmup;

import java.nio.charset.StandardCharsets;
import io.lmcache.server.loop.Inbound;
import io.lmcache.server.protocol.Op;
import java.io.IOException;
import java.io.UncheckedIOException;
import org.msgpack.core.MessageBufferPacker;
import org.msgpack.core.MessagePack;

/**
 * The warm-up's requests, framed byte for byte as LMCache's MP client frames them (the golden frames of
 * /work/shared/protocol/golden/cpu_roundtrip.jsonl: an {@code IPCCacheServerKey} map with every field in the client's order,
 * the instance id, {@code [[block ids]]}, a 64-byte event, then {@code skip_first_n_tokens} for RETRIEVE), so the decoder
 * runs the branches a real client's requests take. Not thread-safe: one warm-up thread owns it.
 */
final class WarmupFrames {
    private static final byte[] IDENTITY = "lmcache-warmup".getBytes(StandardCharsets.US_ASCII);
    private static final byte[] ZERO_EVENT = new byte[64];

    private final String model;
    private final long instanceId;
    private final MessageBufferPacker packer = MessagePack.newDefaultBufferPacker();
    private int uid;

    WarmupFrames(String model, long instanceId) {
        this.model = model;
        this.instanceId = instanceId;
    }

    /**
     * {@code count} block ids from {@code from}, ascending (one run of consecutive blocks) or descending (no run at all): vLLM
     * hands out both, and a branch the warm-up never took sends the JIT's compiled code back to the interpreter when a real
     * request first takes it.
     */
    static int[] blocks(int from, int count, boolean reversed) {
        int[] out = new int[count];
        for (int i = 0; i < count; i++) {
            out[i] = reversed ? from + count - 1 - i : from + i;
        }
        return out;
    }

    /** STORE of {@code tokens[0, end)} from {@code blocks} (worker 0 of 1). */
    Inbound store(int[] tokens, int end, int[] blocks, String requestId) {
        return inbound(Op.STORE, key(tokens, end, requestId, 0), instance(), blockList(blocks), event());
    }

    /** RETRIEVE of {@code tokens[0, end)} into {@code blocks}, nothing skipped. */
    Inbound retrieve(int[] tokens, int end, int[] blocks, String requestId) {
        return inbound(Op.RETRIEVE, key(tokens, end, requestId, 0), instance(), blockList(blocks), event(), packInt(0));
    }

    /** The scheduler's LOOKUP (worker id nil) of {@code tokens[0, end)}, one kv reader. */
    Inbound lookup(int[] tokens, int end, String requestId) {
        return inbound(Op.LOOKUP, key(tokens, end, requestId, null), packInt(1));
    }

    Inbound queryPrefetchStatus(String requestId) {
        return inbound(Op.QUERY_PREFETCH_STATUS, packString(requestId));
    }

    /** The worker's heartbeat: PING with its instance id. Its reply, True, is the one Bool the other requests never answer. */
    Inbound ping() {
        return inbound(Op.PING, instance());
    }

    /** END_SESSION as the newest client sends it: the request id and a nil. */
    Inbound endSession(String requestId) {
        return inbound(Op.END_SESSION, packString(requestId), new byte[] {(byte) 0xc0});
    }

    private byte[] key(int[] tokens, int end, String requestId, Integer workerId) {
        try {
            packer.clear();
            packer.packMapHeader(10);
            packer.packString("model_name").packString(model);
            packer.packString("world_size").packInt(1);
            packer.packString("worker_id");
            if (workerId == null) {
                packer.packNil();
            } else {
                packer.packInt(workerId);
            }
            packer.packString("token_ids").packArrayHeader(end);
            for (int i = 0; i < end; i++) {
                packer.packInt(tokens[i]);
            }
            packer.packString("start").packInt(0);
            packer.packString("end").packInt(end);
            packer.packString("request_id").packString(requestId);
            packer.packString("cache_salt").packString("");
            packer.packString("request_configs").packNil();
            packer.packString("num_kv_readers").packInt(1);
            return packer.toByteArray();
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    private byte[] blockList(int[] blocks) {
        try {
            packer.clear();
            packer.packArrayHeader(1).packArrayHeader(blocks.length);
            for (int block : blocks) {
                packer.packInt(block);
            }
            return packer.toByteArray();
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    private byte[] instance() {
        try {
            packer.clear();
            packer.packLong(instanceId);
            return packer.toByteArray();
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    private byte[] event() {
        try {
            packer.clear();
            packer.packBinaryHeader(ZERO_EVENT.length).writePayload(ZERO_EVENT);
            return packer.toByteArray();
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    private byte[] packInt(int value) {
        try {
            packer.clear();
            packer.packInt(value);
            return packer.toByteArray();
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    private byte[] packString(String value) {
        try {
            packer.clear();
            packer.packString(value);
            return packer.toByteArray();
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    /** {@code [identity, uid, op, payloads...]} as the socket thread hands a request to the dispatcher. */
    private Inbound inbound(Op op, byte[]... payloads) {
        byte[][] frames = new byte[Inbound.FIRST_PAYLOAD + payloads.length][];
        frames[0] = IDENTITY;
        frames[1] = packInt(++uid & 0x7fff_ffff);
        frames[2] = packInt(op.id());
        System.arraycopy(payloads, 0, frames, Inbound.FIRST_PAYLOAD, payloads.length);
        return new Inbound(frames, frames.length, op, System.nanoTime());
    }
}
