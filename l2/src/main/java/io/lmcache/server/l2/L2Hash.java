package io.lmcache.server.l2;

import java.util.HexFormat;

/**
 * A chunk hash as L2 names carry it: LMCache's {@code chunk_hash}, 32 bytes ({@code w0} the most significant eight), named as
 * {@code chunk_hash.hex()}, 64 lower-case hex digits. The server's {@code storage.ChunkHash} has the same four words; a 128-bit
 * hash fills {@code w0} and {@code w1} and leaves the rest zero (its name then ends in 32 zeros).
 */
public record L2Hash(long w0, long w1, long w2, long w3) {
    /** Hex digits of a hash in a name. */
    public static final int HEX_DIGITS = 64;
    private static final HexFormat HEX = HexFormat.of();

    /** {@code chunk_hash.hex()}: 64 lower-case hex digits, most significant first. */
    public String hex() {
        return HEX.toHexDigits(w0) + HEX.toHexDigits(w1) + HEX.toHexDigits(w2) + HEX.toHexDigits(w3);
    }

    /** The hash {@link #hex} names; {@code hex} is 64 hex digits (callers match them first). */
    public static L2Hash parse(CharSequence hex) {
        return new L2Hash(HEX.fromHexDigitsToLong(hex, 0, 16), HEX.fromHexDigitsToLong(hex, 16, 32), HEX.fromHexDigitsToLong(hex, 32, 48),
                HEX.fromHexDigitsToLong(hex, 48, 64));
    }

    @Override
    public int hashCode() {
        return Long.hashCode(w0 ^ w1 ^ w2 ^ w3);
    }
}
