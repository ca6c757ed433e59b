package io.lmcache.server.testing;

import static io.lmcache.server.testing.TestClient.pack;

import io.lmcache.server.testing.MalformedMessages.Message;
import io.lmcache.server.testing.MalformedMessages.Outcome;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.EnumMap;
import java.util.HashMap;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.atomic.AtomicBoolean;

/**
 * Sends malformed messages ({@link MalformedMessages}) from several DEALERs while a real client
 * checks its replies byte for byte, and tallies what came back. Shared by FuzzIT and the flood
 * benchmark in bench/.
 *
 * <p>Each fuzz connection pipelines a window of messages, then waits (bounded) for exactly the
 * replies the window's outcomes call for, matched by their echoed uid and op frames. The checker
 * pipelines PING, GET_CHUNK_SIZE and LOOKUP (empty cache) batches until the fuzzers are done.
 */
public final class FuzzRun {
    private static final HexFormat HEX = HexFormat.of();
    private static final int CHECKER_BATCH = 30;

    /**
     * @param window messages a fuzz connection sends before it waits for their replies
     * @param replyTimeout how long a window (or a checker batch) waits for its last reply
     */
    public record Options(String endpoint, long messages, int connections, long seed, int window, Duration replyTimeout) {}

    /** What happened; {@code problems} holds the first few descriptions of anything wrong. */
    public record Tally(long sent, long bytesSent, Map<Outcome, Long> byOutcome, Map<String, Long> byKind, long repliesExpected,
            long repliesReceived, long unexpectedReplies, long checkerRequests, long checkerReplies, long checkerMismatches,
            List<String> problems, long elapsedNs) {
        public long lostReplies() {
            return repliesExpected - repliesReceived;
        }

        public long checkerLost() {
            return checkerRequests - checkerReplies;
        }

        public long count(Outcome outcome) {
            return byOutcome.getOrDefault(outcome, 0L);
        }
    }

    private final Options options;
    private final AtomicBoolean fuzzing = new AtomicBoolean(true);
    private final List<String> problems = Collections.synchronizedList(new ArrayList<>());
    private final Map<Outcome, Long> byOutcome = new EnumMap<>(Outcome.class);
    private final Map<String, Long> byKind = new TreeMap<>();
    private long sent;
    private long bytesSent;
    private long repliesExpected;
    private long repliesReceived;
    private long unexpectedReplies;
    private long checkerRequests;
    private long checkerReplies;
    private long checkerMismatches;

    private FuzzRun(Options options) {
        this.options = options;
    }

    /** Runs to the end and returns the tally; never waits longer than the reply timeout for any one reply. */
    public static Tally run(Options options) throws InterruptedException {
        return new FuzzRun(options).go();
    }

    private Tally go() throws InterruptedException {
        long startNs = System.nanoTime();
        // runs on: fuzz-checker
        Thread checker = new Thread(this::check, "fuzz-checker");
        checker.start();
        List<Thread> fuzzers = new ArrayList<>();
        for (int c = 0; c < options.connections(); c++) {
            int connection = c;
            long share = options.messages() / options.connections() + (c < options.messages() % options.connections() ? 1 : 0);
            // runs on: fuzz-<n>
            Thread fuzzer = new Thread(() -> fuzz(connection, share), "fuzz-" + c);
            fuzzers.add(fuzzer);
            fuzzer.start();
        }
        for (Thread fuzzer : fuzzers) {
            fuzzer.join();
        }
        fuzzing.set(false);
        checker.join();
        synchronized (this) {
            return new Tally(sent, bytesSent, new EnumMap<>(byOutcome), new TreeMap<>(byKind), repliesExpected, repliesReceived,
                    unexpectedReplies, checkerRequests, checkerReplies, checkerMismatches, List.copyOf(problems), System.nanoTime() - startNs);
        }
    }

    private void problem(String text) {
        if (problems.size() < 20) {
            problems.add(text);
        }
    }

    private void fuzz(int connection, long messages) {
        MalformedMessages generator = new MalformedMessages(options.seed() * 1_000_003L + connection);
        long done = 0;
        int silentWindows = 0;
        try (TestClient client = new TestClient(options.endpoint())) {
            while (done < messages) {
                int count = (int) Math.min(options.window(), messages - done);
                Map<String, Integer> awaited = new HashMap<>();
                int expected = 0;
                long bytes = 0;
                Map<Outcome, Long> outcomes = new EnumMap<>(Outcome.class);
                Map<String, Long> kinds = new HashMap<>();
                for (int i = 0; i < count; i++) {
                    Message message = generator.next();
                    client.sendRaw(message.frames());
                    bytes += message.bytes();
                    outcomes.merge(message.outcome(), 1L, Long::sum);
                    kinds.merge(message.kind(), 1L, Long::sum);
                    if (message.outcome().replied()) {
                        awaited.merge(key(message.frames()[0], message.frames()[1]), 1, Integer::sum);
                        expected++;
                    }
                }
                done += count;
                int received = 0;
                int unexpected = 0;
                long deadlineNs = System.nanoTime() + options.replyTimeout().toNanos();
                while (received < expected) {
                    long leftNs = deadlineNs - System.nanoTime();
                    TestClient.Reply reply = leftNs <= 0 ? null : client.receive(Duration.ofNanos(leftNs));
                    if (reply == null) {
                        break;
                    }
                    String key = key(reply.uid(), reply.op());
                    if (awaited.merge(key, -1, Integer::sum) < 0) {
                        unexpected++;
                        problem("fuzz-" + connection + ": a reply to no message of the window: " + key);
                    } else {
                        received++;
                    }
                }
                if (received < expected) {
                    problem("fuzz-" + connection + ": " + (expected - received) + " of " + expected + " replies missing after "
                            + options.replyTimeout() + ", e.g. " + awaited.entrySet().stream().filter(e -> e.getValue() > 0).findFirst()
                                    .map(Map.Entry::getKey).orElse("?"));
                }
                synchronized (this) {
                    sent += count;
                    bytesSent += bytes;
                    repliesExpected += expected;
                    repliesReceived += received;
                    unexpectedReplies += unexpected;
                    outcomes.forEach((o, n) -> byOutcome.merge(o, n, Long::sum));
                    kinds.forEach((k, n) -> byKind.merge(k, n, Long::sum));
                }
                // a server that stopped answering altogether: stop, rather than wait out every window
                silentWindows = received == 0 && expected > 0 ? silentWindows + 1 : 0;
                if (silentWindows == 3) {
                    problem("fuzz-" + connection + ": three windows without a single reply; stopped after " + done + " messages");
                    return;
                }
            }
        }
    }

    private static String key(byte[] uid, byte[] op) {
        return HEX.formatHex(uid) + "/" + (op == null ? "-" : HEX.formatHex(op));
    }

    /** The valid client: PING (untracked), GET_CHUNK_SIZE and LOOKUP of an empty cache, replies compared byte for byte. */
    private void check() {
        byte[] lookupKey = MalformedMessages.lookupKey("fuzz-checker", 256);
        byte[] tpSize = pack(p -> p.packInt(1));
        byte[] nil = pack(p -> p.packNil());
        try (TestClient client = new TestClient(options.endpoint())) {
            boolean last = false;
            while (!last) {
                last = !fuzzing.get();
                Map<String, String> awaited = new HashMap<>();
                for (int i = 0; i < CHECKER_BATCH; i++) {
                    int uid;
                    String want;
                    switch (i % 3) {
                        case 0 -> {
                            uid = client.send(22, nil);
                            want = "22:c3";
                        }
                        case 1 -> {
                            uid = client.send(21);
                            want = "21:cd0100";
                        }
                        default -> {
                            uid = client.send(8, lookupKey, tpSize);
                            want = "8:none";
                        }
                    }
                    awaited.put(HEX.formatHex(pack(p -> p.packInt(uid))), want);
                }
                int replies = 0;
                int mismatches = 0;
                long deadlineNs = System.nanoTime() + options.replyTimeout().toNanos();
                while (!awaited.isEmpty()) {
                    long leftNs = deadlineNs - System.nanoTime();
                    TestClient.Reply reply = leftNs <= 0 ? null : client.receive(Duration.ofNanos(leftNs));
                    if (reply == null) {
                        problem("checker: " + awaited.size() + " replies missing after " + options.replyTimeout());
                        break;
                    }
                    String want = awaited.remove(HEX.formatHex(reply.uid()));
                    if (want == null) {
                        mismatches++;
                        problem("checker: a reply to no request of the batch, uid " + HEX.formatHex(reply.uid()));
                        continue;
                    }
                    replies++;
                    String op = want.substring(0, want.indexOf(':'));
                    String got = HEX.formatHex(pack(p -> p.packInt(Integer.parseInt(op)))).equals(HEX.formatHex(reply.op()))
                            ? op + ":" + (reply.payload() == null ? "none" : reply.payloadHex()) : "op frame " + HEX.formatHex(reply.op());
                    boolean frames = reply.frames() == (reply.payload() == null ? 2 : 3);
                    if (!got.equals(want) || !frames) {
                        mismatches++;
                        problem("checker: expected " + want + ", got " + got + " in " + reply.frames() + " frames");
                    }
                }
                synchronized (this) {
                    checkerRequests += CHECKER_BATCH;
                    checkerReplies += replies;
                    checkerMismatches += mismatches;
                }
                if (replies == 0) {
                    return;
                }
            }
        }
    }
}
