package io.lmcache.bench.hash;

import io.lmcache.bench.Machine;
import io.lmcache.server.protocol.TokenHashChain;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.nio.ByteOrder;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Random;
import org.bouncycastle.crypto.digests.Blake3Digest;

/**
 * The cost of one 256-token chunk's hash on the lookup path (issue 27), without JMH: the old server hash
 * ({@link OldChunkHasher}, SHA-256 over little-endian int32, 128 bits kept) as the same-run baseline, LMCache's
 * {@code blake3} chain with our {@code Blake3} as it was at 3a020d9 ({@link Blake3Before}) and as it is now
 * ({@link TokenHashChain#blake3()}, what the server runs), the same chain with BouncyCastle's {@code Blake3Digest}, and vLLM's
 * {@code sha256_cbor}. Each round hashes an 8192-token prompt
 * (32 chunks, random ids below 151 936) into preallocated output, many times, for every variant in turn (so a noisy
 * neighbour hits all alike); the figure is ns per chunk, the median and minimum over rounds.
 *
 * <p>Usage: {@code HashCostMain [rounds] [ms-per-variant-per-round]} (defaults 15 and 200).
 */
public final class HashCostMain {
    private static final int CHUNK = 256;
    private static final int TOKENS = 8192;
    private static final int CHUNKS = TOKENS / CHUNK;
    private static final VarHandle INT_BE = MethodHandles.byteArrayViewVarHandle(int[].class, ByteOrder.BIG_ENDIAN);

    private interface Variant {
        String name();

        void hashPrompt();
    }

    private HashCostMain() {}

    public static void main(String[] args) {
        int rounds = args.length > 0 ? Integer.parseInt(args[0]) : 15;
        long perRoundNs = (args.length > 1 ? Long.parseLong(args[1]) : 200) * 1_000_000L;
        int[] tokens = new Random(27).ints(TOKENS, 0, 151_936).toArray();
        List<Variant> variants = variants(tokens);
        for (Variant v : variants) { // warm-up: the JIT compiles every variant before the first round
            run(v, 2_000_000_000L);
        }
        double[][] nsPerChunk = new double[variants.size()][rounds];
        for (int r = 0; r < rounds; r++) {
            for (int i = 0; i < variants.size(); i++) {
                nsPerChunk[i][r] = run(variants.get(i), perRoundNs);
            }
        }
        System.out.println("# " + Machine.describe());
        System.out.printf("# %d rounds x %d ms per variant, %d-token prompt (%d chunks of %d)%n", rounds, perRoundNs / 1_000_000, TOKENS,
                CHUNKS, CHUNK);
        System.out.println("variant | ns/chunk median | ns/chunk min | x baseline (median)");
        double base = median(nsPerChunk[0]);
        for (int i = 0; i < variants.size(); i++) {
            double med = median(nsPerChunk[i]);
            System.out.printf("%s | %.0f | %.0f | %.2f%n", variants.get(i).name(), med, Arrays.stream(nsPerChunk[i]).min().orElseThrow(),
                    med / base);
        }
    }

    private static List<Variant> variants(int[] tokens) {
        List<Variant> variants = new ArrayList<>();
        OldChunkHasher old = new OldChunkHasher();
        long[] oldHashes = new long[2 * CHUNKS];
        variants.add(variant("old ChunkHasher (SHA-256, 128 bits)", () -> old.hashChunks(tokens, CHUNK, CHUNKS, oldHashes)));
        TokenHashChain blake3 = TokenHashChain.blake3();
        byte[] root = blake3.root();
        Blake3Before before = new Blake3Before();
        byte[] beforeHashes = new byte[TokenHashChain.HASH_BYTES * CHUNKS];
        variants.add(variant("blake3 chain, our Blake3 as of 3a020d9 (byte buffer, looped rounds)", () -> {
            for (int c = 0; c < CHUNKS; c++) {
                before.chunk(c == 0 ? root : beforeHashes, c == 0 ? 0 : 32 * (c - 1), tokens, c * CHUNK, (c + 1) * CHUNK, beforeHashes, 32 * c);
            }
        }));
        byte[] hashes = new byte[TokenHashChain.HASH_BYTES * CHUNKS];
        variants.add(variant("blake3 chain, our Blake3 (the server's)", () -> blake3.hashChunks(tokens, CHUNK, 0, CHUNKS, hashes)));
        Blake3Digest digest = new Blake3Digest(256);
        byte[] buffer = new byte[32 + 4 * CHUNK];
        byte[] bcHashes = new byte[TokenHashChain.HASH_BYTES * CHUNKS];
        variants.add(variant("blake3 chain, BouncyCastle Blake3Digest", () -> {
            for (int c = 0; c < CHUNKS; c++) {
                System.arraycopy(c == 0 ? root : bcHashes, c == 0 ? 0 : 32 * (c - 1), buffer, 0, 32);
                for (int t = 0; t < CHUNK; t++) {
                    INT_BE.set(buffer, 32 + 4 * t, tokens[c * CHUNK + t]);
                }
                digest.update(buffer, 0, buffer.length);
                digest.doFinal(bcHashes, 32 * c);
            }
        }));
        TokenHashChain cbor = TokenHashChain.sha256Cbor("0");
        byte[] cborHashes = new byte[TokenHashChain.HASH_BYTES * CHUNKS];
        variants.add(variant("sha256_cbor chain", () -> cbor.hashChunks(tokens, CHUNK, 0, CHUNKS, cborHashes)));
        for (int i = 1; i <= 3; i++) {
            variants.get(i).hashPrompt();
        }
        if (!Arrays.equals(hashes, bcHashes) || !Arrays.equals(beforeHashes, bcHashes)) {
            throw new IllegalStateException("our Blake3s and BouncyCastle's disagree: the figures would compare different work");
        }
        return variants;
    }

    private static Variant variant(String name, Runnable body) {
        return new Variant() {
            @Override
            public String name() {
                return name;
            }

            @Override
            public void hashPrompt() {
                body.run();
            }
        };
    }

    /** Hashes the prompt again and again for about {@code forNs}; returns ns per chunk. */
    private static double run(Variant v, long forNs) {
        long calls = 0;
        long start = System.nanoTime();
        long now = start;
        while (now - start < forNs) {
            for (int i = 0; i < 16; i++) {
                v.hashPrompt();
            }
            calls += 16;
            now = System.nanoTime();
        }
        return (double) (now - start) / (calls * CHUNKS);
    }

    private static double median(double[] values) {
        double[] sorted = values.clone();
        Arrays.sort(sorted);
        return sorted[sorted.length / 2];
    }
}
