package io.lmcache.bench.hash;

import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.security.DigestException;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;

/**
 * The server's chunk hashes before issue 27, kept as the benchmarks' baseline (the server now hashes with
 * LMCache's chain, {@code TokenHashChain}):
 * {@code h_i = SHA-256(h_(i-1) || tokens[i*C, (i+1)*C) as little-endian int32)}, truncated to
 * 128 bits, starting from a fixed seed. A chunk's hash therefore names the whole prefix up to its
 * end.
 *
 * <p>Not thread-safe: one hasher per thread.
 */
public final class OldChunkHasher {
    private static final VarHandle INT_LE = MethodHandles.byteArrayViewVarHandle(int[].class, ByteOrder.LITTLE_ENDIAN);
    private static final VarHandle LONG_BE = MethodHandles.byteArrayViewVarHandle(long[].class, ByteOrder.BIG_ENDIAN);
    private static final long SEED_HI;
    private static final long SEED_LO;

    static {
        byte[] seed = sha256().digest("lmcache-server/chunk-hash/v1".getBytes(StandardCharsets.US_ASCII));
        SEED_HI = (long) LONG_BE.get(seed, 0);
        SEED_LO = (long) LONG_BE.get(seed, 8);
    }

    private final MessageDigest digest = sha256();
    private final byte[] out = new byte[32];
    private byte[] buffer = new byte[16];

    /**
     * Hashes the first {@code numChunks} complete chunks of {@code tokens} into {@code hashes}
     * (two longs per chunk: high, low).
     */
    public void hashChunks(int[] tokens, int chunkSize, int numChunks, long[] hashes) {
        hashChunks(tokens, chunkSize, 0, numChunks, hashes);
    }

    /**
     * Hashes chunks {@code [fromChunk, toChunk)} into {@code hashes}, continuing the chain from the
     * hash of chunk {@code fromChunk - 1}, which must already be in {@code hashes}. A lookup hashes
     * only as far as the cache holds the prefix.
     */
    public void hashChunks(int[] tokens, int chunkSize, int fromChunk, int toChunk, long[] hashes) {
        if ((long) toChunk * chunkSize > tokens.length || fromChunk < 0 || fromChunk > toChunk) {
            throw new IllegalArgumentException("chunks [" + fromChunk + ", " + toChunk + ") of " + chunkSize + " do not fit "
                    + tokens.length + " tokens");
        }
        int bytes = 16 + 4 * chunkSize;
        if (buffer.length < bytes) {
            buffer = new byte[bytes];
        }
        long hi = fromChunk == 0 ? SEED_HI : hashes[2 * fromChunk - 2];
        long lo = fromChunk == 0 ? SEED_LO : hashes[2 * fromChunk - 1];
        for (int chunk = fromChunk; chunk < toChunk; chunk++) {
            LONG_BE.set(buffer, 0, hi);
            LONG_BE.set(buffer, 8, lo);
            int base = chunk * chunkSize;
            for (int t = 0; t < chunkSize; t++) {
                INT_LE.set(buffer, 16 + 4 * t, tokens[base + t]);
            }
            digest.update(buffer, 0, bytes);
            try {
                digest.digest(out, 0, out.length);
            } catch (DigestException e) {
                throw new IllegalStateException(e);
            }
            hi = (long) LONG_BE.get(out, 0);
            lo = (long) LONG_BE.get(out, 8);
            hashes[2 * chunk] = hi;
            hashes[2 * chunk + 1] = lo;
        }
    }

    private static MessageDigest sha256() {
        try {
            return MessageDigest.getInstance("SHA-256");
        } catch (NoSuchAlgorithmException e) {
            throw new IllegalStateException("every Java runtime has SHA-256", e);
        }
    }
}
