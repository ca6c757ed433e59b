package io.lmcache.bench.jmh;

import io.lmcache.bench.latency.Requests;
import io.lmcache.server.protocol.CacheKey;
import io.lmcache.server.protocol.ProtocolException;
import io.lmcache.server.protocol.Request;
import io.lmcache.server.protocol.RequestDecoder;
import io.lmcache.server.transfer.ChunkHashes;
import java.io.IOException;
import java.util.concurrent.TimeUnit;
import org.msgpack.core.MessagePack;
import org.msgpack.core.MessageUnpacker;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Measurement;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.Warmup;

/**
 * The two CPU costs of a LOOKUP in its handler, on the exact payload the latency benchmark sends
 * (a 512-token IPCCacheServerKey, tp_size 1): decoding it with the server's {@link RequestDecoder},
 * and hashing its two chunks. The baseline is the least msgpack-core itself needs to read the same
 * frame: walk the map, unpack the 512 token ids into an int[], skip the other values. {@code decodeLookup}
 * decodes the same frame again and again, so its token ids come from the decode memo (a scheduler
 * re-asking about a waiting request); {@code decodeLookupFirstSight} cycles through 64 prompts, more
 * than the memo's 16 slots hold, so each is decoded (and remembered) as a first LOOKUP is; {@code
 * hashTwoChunks} likewise measures the hash memo's hit.
 */
@State(Scope.Thread)
@BenchmarkMode(Mode.SampleTime)
@OutputTimeUnit(TimeUnit.NANOSECONDS)
@Warmup(iterations = 3, time = 1)
@Measurement(iterations = 5, time = 1)
@Fork(value = 1, jvmArgs = {"-Xms512m", "-Xmx512m"})
public class LookupPathBench {
    static final int LONG_PROMPT_TOKENS = 64 * 544;
    private byte[][] frames;
    private final RequestDecoder decoder = new RequestDecoder();
    private CacheKey key;

    private final byte[][][] distinct = new byte[64][][];
    private int next;
    /** 64 prompts of 34 816 tokens (a Qwen-like 64-chunk request at chunk 544), each decoded at first sight. */
    private final byte[][][] longPrompts = new byte[64][][];
    private final byte[] copyTarget = new byte[1 << 20];
    private int nextLong;

    @Setup
    public void setUp() throws ProtocolException {
        frames = Requests.lookup(0, 42).payloads();
        key = decoder.lookup(frames, 0, frames.length).key();
        for (int i = 0; i < distinct.length; i++) {
            distinct[i] = Requests.lookup(0, 1_000 + i).payloads();
            longPrompts[i] = Requests.lookup(0, 2_000 + i, LONG_PROMPT_TOKENS).payloads();
        }
    }

    @Benchmark
    public Request decodeLookup() throws ProtocolException {
        return decoder.lookup(frames, 0, frames.length);
    }

    @Benchmark
    public Request decodeLookupFirstSight() throws ProtocolException {
        byte[][] prompt = distinct[next];
        next = (next + 1) & (distinct.length - 1);
        return decoder.lookup(prompt, 0, prompt.length);
    }

    /** The decode of a long prompt's key at first sight (the memo remembers it, another of the 64 is next). */
    @Benchmark
    public Request decodeLongPromptFirstSight() throws ProtocolException {
        byte[][] prompt = longPrompts[nextLong];
        nextLong = (nextLong + 1) & (longPrompts.length - 1);
        return decoder.lookup(prompt, 0, prompt.length);
    }

    /**
     * The decode of one long prompt's key again and again, its token ids from the decode memo: what a RETRIEVE or STORE
     * costs after the scheduler's LOOKUP of the same prompt (against the server's decode phase on the H200: bench/RESULTS.md#lookup-path).
     */
    @Benchmark
    public Request decodeLongPromptRemembered() throws ProtocolException {
        byte[][] prompt = longPrompts[0];
        return decoder.lookup(prompt, 0, prompt.length);
    }

    /** The baseline of {@link #decodeLongPromptFirstSight}: a copy of the same bytes. */
    @Benchmark
    public byte[] copyLongPromptBaseline() {
        byte[] key = longPrompts[nextLong][0];
        nextLong = (nextLong + 1) & (longPrompts.length - 1);
        System.arraycopy(key, 0, copyTarget, 0, key.length);
        return copyTarget;
    }

    @Benchmark
    public byte[] hashTwoChunks() {
        return ChunkHashes.of(key, 256, 2);
    }

    @Benchmark
    public int[] msgpackCoreBaseline() throws IOException {
        try (MessageUnpacker unpacker = MessagePack.newDefaultUnpacker(frames[0])) {
            int[] tokens = null;
            for (int fields = unpacker.unpackMapHeader(); fields > 0; fields--) {
                if (unpacker.unpackString().equals("token_ids")) {
                    tokens = new int[unpacker.unpackArrayHeader()];
                    for (int i = 0; i < tokens.length; i++) {
                        tokens[i] = unpacker.unpackInt();
                    }
                } else {
                    unpacker.skipValue();
                }
            }
            return tokens;
        }
    }
}
