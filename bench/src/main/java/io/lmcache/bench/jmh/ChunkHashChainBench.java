package io.lmcache.bench.jmh;

import io.lmcache.bench.hash.OldChunkHasher;
import io.lmcache.server.protocol.TokenHashChain;
import java.util.Random;
import java.util.concurrent.TimeUnit;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Measurement;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.Warmup;

/**
 * Hashing a prompt's complete 256-token chunks (issue 27): the server's own chain ({@link OldChunkHasher},
 * SHA-256 over little-endian int32, 128 bits kept) against LMCache's {@code blake3} and vLLM's
 * {@code sha256_cbor} ({@link TokenHashChain}), for one chunk and for an 8k-token prompt (32 chunks).
 * Each call hashes into preallocated output, as the lookup path does.
 */
@State(Scope.Thread)
@BenchmarkMode(Mode.SampleTime)
@OutputTimeUnit(TimeUnit.NANOSECONDS)
@Warmup(iterations = 3, time = 1)
@Measurement(iterations = 5, time = 1)
@Fork(value = 1, jvmArgs = {"-Xms512m", "-Xmx512m"})
public class ChunkHashChainBench {
    private static final int CHUNK = 256;

    @Param({"chunkhasher", "blake3", "sha256_cbor"})
    public String algorithm;

    @Param({"256", "8192"})
    public int tokens;

    private int[] tokenIds;
    private int chunks;
    private OldChunkHasher old;
    private TokenHashChain chain;
    private long[] oldHashes;
    private byte[] hashes;

    @Setup
    public void setUp() {
        tokenIds = new Random(27).ints(tokens, 0, 151_936).toArray();
        chunks = tokens / CHUNK;
        old = new OldChunkHasher();
        oldHashes = new long[2 * chunks];
        hashes = new byte[TokenHashChain.HASH_BYTES * chunks];
        chain = switch (algorithm) {
            case "blake3" -> TokenHashChain.blake3();
            case "sha256_cbor" -> TokenHashChain.sha256Cbor("0");
            default -> null;
        };
    }

    @Benchmark
    public Object hashPrompt() {
        if (chain == null) {
            old.hashChunks(tokenIds, CHUNK, chunks, oldHashes);
            return oldHashes;
        }
        chain.hashChunks(tokenIds, CHUNK, 0, chunks, hashes);
        return hashes;
    }
}
