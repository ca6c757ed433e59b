package io.lmcache.server.events;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.lmcache.server.protocol.KvEventKind;
import io.lmcache.server.protocol.Reply;
import io.lmcache.server.protocol.ReplyEncoder;
import java.util.Arrays;
import org.junit.jupiter.api.Test;

/** A read's bounds (issue 45, N2): at most a page of records and about {@link KvEventLog#MAX_REPLY_BYTES}; hashes-only records. */
class KvEventLogTest {
    private static void fill(KvEventLog log, int records, boolean hashesOnly) {
        int chunk = log.chunkSize();
        for (int i = 0; i < records; i++) {
            byte[] chain = new byte[32];
            chain[0] = (byte) i;
            chain[1] = (byte) (i >> 8);
            int[] tokens = new int[chunk];
            Arrays.fill(tokens, 1_000_000 + i);
            log.stored(KvEventLog.Medium.CPU, "m", chain, 0, tokens, hashesOnly);
        }
    }

    @Test
    void aReadOfTwoToTheThirtyOneRecordsGetsAtMostAPage() {
        KvEventLog log = new KvEventLog(4096, 4, 1);
        fill(log, 3000, false);
        Reply.KvEvents page = log.read(0, "m", Integer.MAX_VALUE);
        assertEquals(KvEventLog.MAX_EVENTS, page.events().size());
        assertEquals(KvEventLog.MAX_EVENTS, page.nextCursor(), "next_cursor is the last record returned");
        assertEquals(KvEventLog.MAX_EVENTS + 1, log.read(page.nextCursor(), "m", Integer.MAX_VALUE).events().getFirst().seq());
    }

    @Test
    void aReadOfLongChunksStopsAtTheByteCapAndTheNextResumesRightAfter() {
        KvEventLog log = new KvEventLog(512, 8192, 1);
        fill(log, 300, false);
        ReplyEncoder encoder = new ReplyEncoder();
        long cursor = 0;
        int seen = 0;
        while (seen < 300) {
            Reply.KvEvents page = log.read(cursor, "m", Integer.MAX_VALUE);
            assertTrue(!page.events().isEmpty(), "every read moves on");
            assertTrue(encoder.encode(page).length <= KvEventLog.MAX_REPLY_BYTES, "a reply stays within the byte cap");
            assertEquals(cursor + 1, page.events().getFirst().seq(), "no record skipped");
            assertEquals(page.events().getLast().seq(), page.nextCursor());
            seen += page.events().size();
            cursor = page.nextCursor();
            assertTrue(page.events().size() < 300, "long records make short pages");
        }
        assertEquals(300, seen);
    }

    @Test
    void aSaltedRequestsRecordsCarryHashesButNoTokens() {
        KvEventLog log = new KvEventLog(8, 4, 1);
        fill(log, 1, false);
        fill(log, 1, true);
        Reply.KvEvents page = log.read(0, "m", 10);
        assertEquals(4, page.events().get(0).tokenIds().length);
        Reply.KvEventRecord salted = page.events().get(1);
        assertEquals(KvEventKind.STORED, salted.kind());
        assertEquals(0, salted.tokenIds().length, "no token ids");
        assertEquals(1, salted.blockHashes().size(), "its hash is announced");
        assertArrayEquals(new byte[32], salted.blockHashes().getFirst());
    }
}
