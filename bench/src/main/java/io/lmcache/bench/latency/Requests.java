package io.lmcache.bench.latency;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.util.Random;
import org.msgpack.core.MessageBufferPacker;
import org.msgpack.core.MessagePack;

/**
 * The request payloads the load generator sends, encoded as LMCache's client encodes them (msgspec:
 * a dataclass is a map of every field in declaration order, defaults included).
 */
public final class Requests {
    public static final int PING = 22;
    public static final int LOOKUP = 8;
    public static final int NOOP = 24;
    static final String MODEL = "meta-llama/Llama-3.1-8B-Instruct";

    /** What one benchmark sends and how many frames the real server answers with (uid and op included). */
    public record Kind(String name, int op, byte[][] payloads, int serverReplyFrames) {}

    private Requests() {}

    /** PING from a worker: its 63-bit instance id. Answered {@code [uid, op, c3]}. */
    public static Kind ping(long instanceId) {
        return new Kind("PING", PING, new byte[][] {pack(p -> p.packLong(instanceId))}, 3);
    }

    /**
     * The scheduler's LOOKUP of a 512-token request (two 256-token chunks, protocol doc §3.3/§5):
     * IPCCacheServerKey with worker_id nil and num_kv_readers 1, then tp_size 1. Answered
     * {@code [uid, op]} (None). Each client keeps one request id, as a scheduler re-asking about
     * one request would; the server keeps one result per id, so nothing grows during the run.
     */
    public static Kind lookup(int client, long seed) {
        return lookup(client, seed, 512);
    }

    /** The same LOOKUP of a {@code tokens}-token request (the decode benchmarks' long prompts). */
    public static Kind lookup(int client, long seed, int tokens) {
        Random random = new Random(seed);
        byte[] key = pack(p -> {
            p.packMapHeader(10);
            p.packString("model_name").packString(MODEL);
            p.packString("world_size").packInt(1);
            p.packString("worker_id").packNil();
            p.packString("token_ids").packArrayHeader(tokens);
            for (int i = 0; i < tokens; i++) {
                p.packInt(random.nextInt(150_000)); // vocabulary-sized ids: a mix of uint16 and uint32 encodings
            }
            p.packString("start").packInt(0);
            p.packString("end").packInt(tokens);
            p.packString("request_id").packString("cmpl-bench-" + client);
            p.packString("cache_salt").packString("");
            p.packString("request_configs").packNil();
            p.packString("num_kv_readers").packInt(1);
        });
        return new Kind("LOOKUP", LOOKUP, new byte[][] {key, pack(p -> p.packInt(1))}, 2);
    }

    interface Writer {
        void write(MessageBufferPacker packer) throws IOException;
    }

    static byte[] pack(Writer writer) {
        try (MessageBufferPacker packer = MessagePack.newDefaultBufferPacker()) {
            writer.write(packer);
            return packer.toByteArray();
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }
}
