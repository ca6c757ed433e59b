package io.lmcache.server.tables;

import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.HexFormat;

/**
 * The form in which a string from the wire (a request id, a session id) keys a table that outlives the request: the string
 * itself up to {@link #MAX_CHARS}, else its length and SHA-256 (a megabyte of request id must not stay in the heap after the
 * reply, nor need a megabyte to look up). Equal strings give equal keys; a short string could only share a long one's key by
 * spelling its digest form, which starts with a NUL.
 */
public final class WireKey {
    /** Longer wire strings are keyed by their digest (vLLM's request ids are about 40 characters). */
    public static final int MAX_CHARS = 256;
    /** What a key string costs beyond its characters: the String and its array (compact strings: one byte a char, at worst two). */
    private static final long STRING_OVERHEAD_BYTES = 56;
    private static final HexFormat HEX = HexFormat.of();

    private WireKey() {}

    /** {@code wire} as a table key: itself when short, else NUL, its length and the first 128 bits of its SHA-256 in hex. */
    public static String of(String wire) {
        if (wire == null || wire.length() <= MAX_CHARS) {
            return wire;
        }
        MessageDigest sha = sha256();
        byte[] buffer = new byte[8192];
        int fill = 0;
        for (int i = 0; i < wire.length(); i++) {
            char c = wire.charAt(i);
            buffer[fill++] = (byte) (c >>> 8);
            buffer[fill++] = (byte) c;
            if (fill == buffer.length) {
                sha.update(buffer, 0, fill);
                fill = 0;
            }
        }
        sha.update(buffer, 0, fill);
        return "\u0000" + wire.length() + ":" + HEX.formatHex(sha.digest(), 0, 16);
    }

    /** The heap a key string keeps (an estimate that never undercounts a Latin-1 or UTF-16 string). */
    public static long bytes(String key) {
        return key == null ? 0 : STRING_OVERHEAD_BYTES + 2L * key.length();
    }

    private static MessageDigest sha256() {
        try {
            return MessageDigest.getInstance("SHA-256");
        } catch (NoSuchAlgorithmException e) {
            throw new IllegalStateException("SHA-256 is part of every JDK", e);
        }
    }
}
