package io.lmcache.server.storage;

import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.nio.ByteOrder;
import java.util.HexFormat;

/**
 * A chunk's prefix-chained hash: LMCache's 32-byte {@code chunk_hash} ({@code TokenHashChain}, the
 * {@code --hash-algorithm} chain), as four longs read big-endian, {@code w0} the first eight bytes. Equal
 * hashes name equal token prefixes on every server of a fleet, ours and LMCache's alike.
 */
public record ChunkHash(long w0, long w1, long w2, long w3) {
    /** Bytes of a hash, and the stride of the packed {@code byte[]} chains ({@code transfer.ChunkHashes}). */
    public static final int BYTES = 32;
    private static final VarHandle LONG_BE = MethodHandles.byteArrayViewVarHandle(long[].class, ByteOrder.BIG_ENDIAN);
    private static final HexFormat HEX = HexFormat.of();

    /** Chunk {@code chunk}'s hash in a packed chain ({@link #BYTES} bytes per chunk). */
    public static ChunkHash unpack(byte[] packed, int chunk) {
        int at = BYTES * chunk;
        return new ChunkHash((long) LONG_BE.get(packed, at), (long) LONG_BE.get(packed, at + 8), (long) LONG_BE.get(packed, at + 16),
                (long) LONG_BE.get(packed, at + 24));
    }

    /** The hash of 32 bytes. */
    public static ChunkHash of(byte[] bytes) {
        if (bytes.length != BYTES) {
            throw new IllegalArgumentException("a chunk hash has " + BYTES + " bytes, not " + bytes.length);
        }
        return unpack(bytes, 0);
    }

    /** Writes the 32 bytes to {@code out[offset, offset + 32)}. */
    public void write(byte[] out, int offset) {
        LONG_BE.set(out, offset, w0);
        LONG_BE.set(out, offset + 8, w1);
        LONG_BE.set(out, offset + 16, w2);
        LONG_BE.set(out, offset + 24, w3);
    }

    /** The 32 bytes, as LMCache's {@code ObjectKey.chunk_hash} holds them. */
    public byte[] bytes() {
        byte[] out = new byte[BYTES];
        write(out, 0);
        return out;
    }

    /**
     * The hash as LMCache writes it into L2 names: Python's {@code chunk_hash.hex()}, 64 lower-case hex digits, first
     * byte first ({@code lmcache/v1/distributed/l2_adapters/fs_key_codec.py}, {@code EncodedObjectKey.chunk_hash_hex}).
     */
    public String hex() {
        return HEX.toHexDigits(w0) + HEX.toHexDigits(w1) + HEX.toHexDigits(w2) + HEX.toHexDigits(w3);
    }

    @Override
    public int hashCode() {
        // already uniformly distributed: one word is enough
        return (int) (w1 ^ (w1 >>> 32));
    }

    @Override
    public String toString() {
        return hex();
    }
}
