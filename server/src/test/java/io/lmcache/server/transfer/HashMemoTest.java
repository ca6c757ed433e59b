package io.lmcache.server.transfer;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.lmcache.server.protocol.CacheKey;
import io.lmcache.server.protocol.RequestConfigs;
import io.lmcache.server.protocol.RequestDecoder;
import io.lmcache.server.protocol.TokenHashChain;
import io.lmcache.server.storage.ChunkHash;
import java.util.Arrays;
import java.util.Random;
import org.junit.jupiter.api.Test;
import org.msgpack.core.MessageBufferPacker;
import org.msgpack.core.MessagePack;

/** The memo gives exactly the hashes the chain computes, and only for the whole leading chunks whose tokens agree. */
class HashMemoTest {
    private static final int CHUNK = 16;
    private static final Object CHAIN = new Object();

    private static int[] tokens(long seed, int count) {
        Random random = new Random(seed);
        int[] tokens = new int[count];
        Arrays.setAll(tokens, i -> random.nextInt(150_000));
        return tokens;
    }

    private static byte[] direct(int[] tokens, int chunks) {
        byte[] hashes = new byte[ChunkHash.BYTES * chunks];
        TokenHashChain.blake3().hashChunks(tokens, CHUNK, 0, chunks, hashes);
        return hashes;
    }

    /** The memo's part, then the chain for the rest: what ChunkHashes.extend does. */
    private static byte[] viaMemo(HashMemo memo, int[] tokens, int chunks, int[] reused) {
        byte[] hashes = new byte[ChunkHash.BYTES * chunks];
        int done = memo.reuse(CHAIN, tokens, CHUNK, 0, chunks, hashes);
        TokenHashChain.blake3().hashChunks(tokens, CHUNK, done, chunks, hashes);
        reused[0] = done;
        return hashes;
    }

    @Test
    void sameTokensReuseEveryChunkAndLongerKeysOnlyTheCommonOnes() {
        HashMemo memo = new HashMemo();
        int[] prompt = tokens(1, 8 * CHUNK);
        memo.remember(CHAIN, prompt, CHUNK, 8, direct(prompt, 8));
        int[] reused = new int[1];
        assertArrayEquals(direct(prompt, 8), viaMemo(memo, prompt.clone(), 8, reused));
        assertEquals(8, reused[0]);
        // the prompt and what the model generated after it: the prompt's 8 chunks come from the memo, 4 are computed
        int[] longer = Arrays.copyOf(prompt, 12 * CHUNK);
        System.arraycopy(tokens(2, 4 * CHUNK), 0, longer, 8 * CHUNK, 4 * CHUNK);
        assertArrayEquals(direct(longer, 12), viaMemo(memo, longer, 12, reused));
        assertEquals(8, reused[0]);
        assertEquals(16, memo.reusedChunks());
    }

    @Test
    void aTokenThatDiffersEndsTheReuseAtItsChunk() {
        HashMemo memo = new HashMemo();
        int[] prompt = tokens(3, 8 * CHUNK);
        memo.remember(CHAIN, prompt, CHUNK, 8, direct(prompt, 8));
        int[] other = prompt.clone();
        other[5 * CHUNK + 3]++;
        int[] reused = new int[1];
        assertArrayEquals(direct(other, 8), viaMemo(memo, other, 8, reused));
        assertEquals(5, reused[0]);
    }

    @Test
    void theEntryKeepsItsOwnCopyOfTheTokens() {
        HashMemo memo = new HashMemo();
        int[] prompt = tokens(4, 4 * CHUNK);
        memo.remember(CHAIN, prompt, CHUNK, 4, direct(prompt, 4));
        prompt[2 * CHUNK] ^= 1; // the request's array written afterwards: the memo must not follow it
        int[] reused = new int[1];
        assertArrayEquals(direct(prompt, 4), viaMemo(memo, prompt, 4, reused));
        assertEquals(2, reused[0]);
    }

    @Test
    void anotherChainOrChunkSizeIsNeverReused() {
        HashMemo memo = new HashMemo();
        int[] prompt = tokens(5, 4 * CHUNK);
        memo.remember(CHAIN, prompt, CHUNK, 4, direct(prompt, 4));
        byte[] hashes = new byte[ChunkHash.BYTES * 4];
        assertEquals(0, memo.reuse(new Object(), prompt, CHUNK, 0, 4, hashes));
        assertEquals(0, memo.reuse(CHAIN, prompt, CHUNK / 2, 0, 4, hashes));
        assertEquals(0, memo.reusedChunks());
    }

    @Test
    void aPartlyHashedRequestContinuesFromWhereItIs() {
        HashMemo memo = new HashMemo();
        int[] prompt = tokens(6, 8 * CHUNK);
        byte[] all = direct(prompt, 8);
        memo.remember(CHAIN, prompt, CHUNK, 8, all);
        byte[] hashes = Arrays.copyOf(Arrays.copyOf(all, ChunkHash.BYTES * 3), ChunkHash.BYTES * 8); // chunks 0..2 computed already
        assertEquals(6, memo.reuse(CHAIN, prompt, CHUNK, 3, 6, hashes));
        assertArrayEquals(Arrays.copyOf(all, ChunkHash.BYTES * 6), Arrays.copyOf(hashes, ChunkHash.BYTES * 6));
        assertEquals(3, memo.reusedChunks());
    }

    @Test
    void anEntryKeepsAtMostMaxTokens() {
        HashMemo memo = new HashMemo();
        int chunkSize = 1024;
        int chunks = HashMemo.MAX_TOKENS / chunkSize + 4;
        int[] prompt = tokens(7, chunks * chunkSize);
        byte[] hashes = new byte[ChunkHash.BYTES * chunks];
        TokenHashChain.blake3().hashChunks(prompt, chunkSize, 0, chunks, hashes);
        memo.remember(CHAIN, prompt, chunkSize, chunks, hashes);
        assertEquals(HashMemo.MAX_TOKENS / chunkSize, memo.reuse(CHAIN, prompt, chunkSize, 0, chunks, new byte[ChunkHash.BYTES * chunks]));
    }

    /** A scheduler LOOKUP's key of {@code tokens} as LMCache's client frames it, through the server's decoder. */
    private static int[] decodedTokenIds(int[] tokens) throws Exception {
        try (MessageBufferPacker packer = MessagePack.newDefaultBufferPacker()) {
            packer.packMapHeader(4);
            packer.packString("model_name").packString("memo-model");
            packer.packString("world_size").packInt(1);
            packer.packString("worker_id").packNil();
            packer.packString("token_ids").packArrayHeader(tokens.length);
            for (int token : tokens) {
                packer.packInt(token);
            }
            byte[] key = packer.toByteArray();
            return new RequestDecoder().lookup(new byte[][] {key, {1}}, 0, 2).key().tokenIds();
        }
    }

    @Test
    void anArrayTheDecoderSharesIsKeptByReferenceAndMatchedByIdentity() throws Exception {
        HashMemo memo = new HashMemo();
        int[] prompt = tokens(9, 32 * CHUNK);
        int[] shared = decodedTokenIds(prompt);
        assertTrue(RequestDecoder.sharesTokenIds(shared), "a long key's token ids are the decoder's shared array");
        assertSame(shared, decodedTokenIds(prompt), "every request of the same tokens holds that one array");
        memo.remember(CHAIN, shared, CHUNK, 32, direct(prompt, 32));
        int[] reused = new int[1];
        assertArrayEquals(direct(prompt, 32), viaMemo(memo, shared, 32, reused));
        assertEquals(32, reused[0]);
        // white box, against the read-only contract on purpose: a write to the shared array after it was remembered shows
        // the entry holds that array (not a copy) and matches it by identity (not by comparing its tokens)
        shared[20 * CHUNK] ^= 1;
        assertEquals(32, memo.reuse(CHAIN, shared, CHUNK, 0, 32, new byte[ChunkHash.BYTES * 32]), "identity: no comparison");
        assertEquals(20, memo.reuse(CHAIN, prompt, CHUNK, 0, 32, new byte[ChunkHash.BYTES * 32]), "compared with the entry's array");
        // an array the decoder does not share is copied: a later write to it leaves the entry as it was
        int[] own = tokens(10, 8 * CHUNK);
        int[] before = own.clone();
        memo.remember(CHAIN, own, CHUNK, 8, direct(before, 8));
        own[3 * CHUNK] ^= 1;
        assertEquals(8, memo.reuse(CHAIN, before, CHUNK, 0, 8, new byte[ChunkHash.BYTES * 8]));
        assertEquals(3, memo.reuse(CHAIN, own, CHUNK, 0, 8, new byte[ChunkHash.BYTES * 8]));
    }

    @Test
    void chunkHashesOfTheSameTokensTwiceComputeOnceAndAgree() {
        int[] prompt = tokens(8, 6 * CHUNK);
        CacheKey key = new CacheKey("memo-model", 1, CacheKey.NO_WORKER, prompt, 0, prompt.length, "a", "", 1, RequestConfigs.NONE);
        CacheKey again = new CacheKey("memo-model", 1, 0, prompt.clone(), 0, prompt.length, "b", "", 1, RequestConfigs.NONE);
        byte[] first = ChunkHashes.of(key, CHUNK, 6);
        long before = ChunkHashes.reusedChunks();
        assertArrayEquals(first, ChunkHashes.of(again, CHUNK, 6));
        assertArrayEquals(direct(prompt, 6), first);
        assertTrue(ChunkHashes.reusedChunks() - before >= 6, "the second key's 6 chunks came from the memo"); // other tests' threads may add
    }
}
