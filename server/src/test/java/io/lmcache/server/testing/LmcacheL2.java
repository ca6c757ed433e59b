package io.lmcache.server.testing;

import io.lmcache.server.protocol.TokenHashChain;
import java.util.HexFormat;
import java.util.List;
import java.util.Random;

/**
 * LMCache's L2 names and object bytes worked from its definitions, not from the server's code, so tests can plant what a Python
 * LMCache server would have written: {@code keys.h key_to_filename} (LMCache/LMCache {@code csrc/storage_backends/keys.h}
 * @4a3e5e7a), {@code _object_key_to_string} and {@code ValkeyL2Adapter._wire_key} ({@code lmcache/v1/distributed/l2_adapters/}
 * {@code native_connector_l2_adapter.py}, {@code valkey_l2_adapter.py}), and the {@code KV_2LTD} object
 * {@code [2, layers, chunk tokens, heads * head size]} (hybrid-and-l2.md §A.6).
 */
public final class LmcacheL2 {
    private LmcacheL2() {}

    /**
     * The 32-byte hash of each of the first {@code chunks} chunks by LMCache's default chain (its {@code TokenHasher}, blake3),
     * computed from the definition ({@link TokenHashChain}, checked against vectors worked by hand), not by the server's key path.
     */
    public static byte[] serverChunkHashes(int[] tokens, int chunkSize, int chunks) {
        byte[] out = new byte[TokenHashChain.HASH_BYTES * chunks];
        TokenHashChain.blake3().hashChunks(tokens, chunkSize, 0, chunks, out);
        return out;
    }

    /** {@code chunk_hash.hex()} of chunk {@code c}. */
    public static String hashHex(byte[] hashes, int c) {
        return HexFormat.of().formatHex(hashes, TokenHashChain.HASH_BYTES * c, TokenHashChain.HASH_BYTES * (c + 1));
    }

    /** {@code (world_size << 24) | (global_rank << 16) | (local_world_size << 8) | local_rank} on one node. */
    public static int kvRank(int worldSize, int rank) {
        return worldSize << 24 | rank << 16 | worldSize << 8 | rank;
    }

    /** {@code key_to_filename(_object_key_to_string(key))}. */
    public static String fileName(String model, int kvRank, int objectGroup, String hashHex, String salt) {
        return model.replace("/", "-SEP-") + "@0x" + String.format("%08x", kvRank) + "@" + Integer.toHexString(objectGroup) + "@" + hashHex
                + (salt.isEmpty() ? "" : "@" + salt) + ".data";
    }

    /** {@code ValkeyL2Adapter._wire_key}: {@code [key_prefix@]} and {@code _object_key_to_string}. */
    public static String wireKey(String keyPrefix, String model, int kvRank, int objectGroup, String hashHex, String salt) {
        String base = model + "@" + String.format("%08x", kvRank) + "@" + Integer.toHexString(objectGroup) + "@" + hashHex
                + (salt.isEmpty() ? "" : "@" + salt);
        return keyPrefix.isEmpty() ? base : keyPrefix + "@" + base;
    }

    /** A chunk's object of known random KV (bfloat16 K and V of every layer): its bytes are all LMCache stores. */
    public static byte[] object(JavaWorker.Geometry geometry, int chunkSize, long seed) {
        byte[] object = new byte[(int) geometry.chunkObjectBytes(chunkSize)];
        new Random(seed).nextBytes(object);
        return object;
    }

    /**
     * The objects of consecutive chunks as {@link JavaWorker#read} returns the blocks they land in on a FlashAttention NHD worker
     * ({@code [2, nb, bs, nh, hs]} per layer): layer, then plane, then block; block {@code j} of chunk {@code c} holds tokens
     * {@code j*bs ..} of the object's {@code [plane][layer]} row run.
     */
    public static byte[] asWorkerBlocks(JavaWorker.Geometry geometry, int chunkSize, List<byte[]> objects) {
        int rowBytes = geometry.heads() * geometry.headSize() * 2;
        int pieceBytes = (int) geometry.pieceBytes();
        int blocksPerChunk = chunkSize / geometry.blockSize();
        byte[] out = new byte[objects.size() * (int) geometry.chunkObjectBytes(chunkSize)];
        int at = 0;
        for (int layer = 0; layer < geometry.layers(); layer++) {
            for (int plane = 0; plane < 2; plane++) {
                for (byte[] object : objects) {
                    for (int j = 0; j < blocksPerChunk; j++) {
                        int from = ((plane * geometry.layers() + layer) * chunkSize + j * geometry.blockSize()) * rowBytes;
                        System.arraycopy(object, from, out, at, pieceBytes);
                        at += pieceBytes;
                    }
                }
            }
        }
        return out;
    }
}
