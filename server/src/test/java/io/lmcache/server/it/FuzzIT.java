package io.lmcache.server.it;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTimeoutPreemptively;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.lmcache.server.testing.FuzzRun;
import io.lmcache.server.testing.Http;
import io.lmcache.server.testing.MalformedMessages.Outcome;
import io.lmcache.server.testing.ServerExtension;
import io.lmcache.server.testing.ServerMemory;
import io.lmcache.server.testing.TestClient;
import java.time.Duration;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

/**
 * 10^5 mixed malformed messages (random frames, wrong types for every op, truncated msgpack, 4 GiB
 * length declarations, a pickle naming os.system, depth bombs, unknown and unsupported ops, too few
 * frames, 1 MiB frames) from several DEALERs, interleaved with a real client's valid requests:
 * every reply owed comes, the client's replies are byte-exact, each kind is counted where it
 * belongs, the heap stays bounded and the server keeps answering. Deterministic (seeded); the
 * bench/run-flood.sh script runs the same mix at 10^6.
 */
class FuzzIT {
    private static final long MESSAGES = 100_000;
    /**
     * Live heap after a full GC, once the flood is over, above what the idle server held before it (about 20 MiB, plus the
     * KV-event log's preallocated ring, about 33 MiB at the default size).
     */
    private static final double LIVE_HEAP_GROWTH_BOUND_BYTES = 44.0 * 1024 * 1024;

    @RegisterExtension
    static final ServerExtension SERVER = ServerExtension.withFlags();

    private record Counters(double short3, double unknownOps, double unsupported, double decodeFailures, double pickles,
            double badExtensions, double handlerErrors) {
        static Counters read(String scrape) {
            double badRequests = Http.metric(scrape, "lmcache_mp_bad_requests_total");
            double short3 = Http.metric(scrape, "lmcache_mp_bad_requests_total", "reason", "fewer_than_3_frames");
            return new Counters(short3, Http.metric(scrape, "lmcache_mp_unknown_ops_total"), Http.metric(scrape, "lmcache_mp_unsupported_ops_total"),
                    badRequests - short3, Http.metric(scrape, "lmcache_mp_bad_requests_total", "reason", "pickle_rejected"),
                    Http.metric(scrape, "lmcache_mp_bad_requests_total", "reason", "bad_extension"),
                    Http.metric(scrape, "lmcache_mp_handler_errors_total"));
        }
    }

    private static String scrape() {
        return Http.get(SERVER.httpBase() + "/metrics").body();
    }

    @Test
    void aHundredThousandMalformedMessagesAreCountedAnsweredAndForgotten() throws Exception {
        double idleHeap = ServerMemory.heapAfterFullGc(SERVER.server());
        String before = scrape();
        Counters was = Counters.read(before);
        long rssBeforeKib = ServerMemory.rssKib(SERVER.server().pid());
        FuzzRun.Tally tally = assertTimeoutPreemptively(Duration.ofSeconds(50),
                () -> FuzzRun.run(new FuzzRun.Options(SERVER.endpoint(), MESSAGES, 4, 13, 64, Duration.ofSeconds(10))));
        String after = scrape();
        Counters now = Counters.read(after);
        System.out.printf("fuzz: %d messages (%d MiB) in %.1f s %s %s; replies %d/%d, checker %d/%d; RSS %d -> %d KiB; heap %.0f -> %.0f MiB%n",
                tally.sent(), tally.bytesSent() >> 20, tally.elapsedNs() / 1e9, tally.byOutcome(), tally.byKind(), tally.repliesReceived(),
                tally.repliesExpected(), tally.checkerReplies(), tally.checkerRequests(), rssBeforeKib, ServerMemory.rssKib(SERVER.server().pid()),
                heapUsed(before) / 1048576, heapUsed(after) / 1048576);

        assertEquals(List.of(), tally.problems(), "lost, unexpected or wrong replies");
        assertEquals(MESSAGES, tally.sent());
        assertEquals(tally.repliesExpected(), tally.repliesReceived(), "every reply owed to a fuzz connection came");
        assertEquals(0, tally.checkerMismatches(), "the real client's replies are byte-exact");
        assertEquals(tally.checkerRequests(), tally.checkerReplies(), "the real client lost nothing");
        assertTrue(tally.checkerRequests() >= 60, "the real client's requests were interleaved: " + tally.checkerRequests());

        // each kind counted where it belongs; messages whose payload may decode (random bytes, depth bombs) only bound the decode failures
        assertEquals(tally.count(Outcome.SHORT), now.short3() - was.short3(), "fewer_than_3_frames");
        assertEquals(tally.count(Outcome.UNKNOWN_OP), now.unknownOps() - was.unknownOps(), "unknown_ops");
        assertEquals(tally.count(Outcome.UNSUPPORTED), now.unsupported() - was.unsupported(), "unsupported_ops");
        assertEquals(tally.count(Outcome.PICKLE_REJECTED), now.pickles() - was.pickles(), "pickle_rejected");
        long certain = tally.count(Outcome.DECODE_FAILS) + tally.count(Outcome.PICKLE_REJECTED) + tally.count(Outcome.BAD_EXTENSION);
        double decodeFailures = now.decodeFailures() - was.decodeFailures();
        assertTrue(decodeFailures >= certain && decodeFailures <= certain + tally.count(Outcome.REPLY),
                "bad requests " + decodeFailures + " within [" + certain + ", " + (certain + tally.count(Outcome.REPLY)) + "]");
        assertTrue(now.badExtensions() - was.badExtensions() >= tally.count(Outcome.BAD_EXTENSION), "bad_extension");
        assertEquals(0, now.handlerErrors() - was.handlerErrors(), "no decoder or handler threw");

        double liveHeap = ServerMemory.heapAfterFullGc(SERVER.server());
        assertTrue(liveHeap - idleHeap < LIVE_HEAP_GROWTH_BOUND_BYTES, "nothing of the flood is kept: " + liveHeap / 1048576
                + " MiB of heap live after a full GC, " + idleHeap / 1048576 + " before the flood");
        assertTrue(SERVER.server().isAlive());
        try (TestClient client = new TestClient(SERVER.endpoint())) {
            assertEquals("cd0100", client.call(21).payloadHex(), "a fresh connection is answered");
        }
    }

    private static double heapUsed(String scrape) {
        return Http.metric(scrape, "jvm_memory_used_bytes", "area", "heap");
    }
}
