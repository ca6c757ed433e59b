package io.lmcache.bench.hardening;

import static io.lmcache.server.testing.TestClient.pack;

import io.lmcache.server.testing.JavaWorker;
import io.lmcache.server.testing.TestClient;
import java.time.Duration;
import java.util.Arrays;
import java.util.HexFormat;
import java.util.Random;
import java.util.zip.CRC32;

/**
 * One soak client in a process of its own (SoakBench kills some with SIGKILL): a CPU worker with
 * its KV cache in shm, registered, then cycles of STORE of a new 256-token prefix, LOOKUP and
 * QUERY_PREFETCH_STATUS as the scheduler, RETRIEVE of it into other blocks and RETRIEVE of an older
 * prefix of its own, both checksummed against what was stored, until it has made {@code roundTrips}
 * requests (each a round trip: request sent, reply awaited); a PING every 200 ms keeps it alive for
 * the reaper. Prints {@code READY}, then {@code P <counts>} every 10 cycles and {@code DONE <counts>}
 * at the end (see {@link Counts}).
 *
 * <p>Usage: {@code SoakWorker <endpoint> <instanceId> <roundTrips> <seed> <replyTimeoutMs>}
 */
public final class SoakWorker {
    static final JavaWorker.Geometry GEOMETRY = new JavaWorker.Geometry(2, 48, 16, 2, 64);
    static final String MODEL = "soak/model";
    private static final int[] SOURCE = JavaWorker.range(0, 16);
    private static final int[] TARGET = JavaWorker.range(16, 16);
    private static final int[] OLD_TARGET = JavaWorker.range(32, 16);
    private static final int RING = 32;
    private static final long PING_INTERVAL_NS = 200_000_000L;
    private static final byte[] ZERO_EVENT = new byte[64];
    private static final HexFormat HEX = HexFormat.of();

    /** What a worker reports, summed by SoakBench. */
    static final class Counts {
        static final String[] NAMES = {"cycles", "round_trips", "lost", "late", "mismatches", "stored", "store_refused", "hits",
            "retrieved", "retrieve_missed", "old_retrieved", "old_missed"};
        final long[] values = new long[NAMES.length];

        String line() {
            StringBuilder out = new StringBuilder();
            for (long value : values) {
                out.append(' ').append(value);
            }
            return out.toString();
        }

        static Counts parse(String words) {
            Counts counts = new Counts();
            if (words.isBlank()) {
                return counts;
            }
            String[] parts = words.trim().split(" ");
            for (int i = 0; i < NAMES.length && i < parts.length; i++) {
                counts.values[i] = Long.parseLong(parts[i]);
            }
            return counts;
        }

        void add(Counts other) {
            for (int i = 0; i < values.length; i++) {
                values[i] += other.values[i];
            }
        }

        long get(String name) {
            return values[Arrays.asList(NAMES).indexOf(name)];
        }
    }

    private final JavaWorker worker;
    private final TestClient client;
    private final long instanceId;
    private final Duration replyTimeout;
    private final Counts counts = new Counts();
    private long lastPingNs;

    private SoakWorker(String endpoint, long instanceId, Duration replyTimeout) {
        this.worker = new JavaWorker(endpoint, instanceId, MODEL, GEOMETRY);
        this.client = worker.client();
        this.instanceId = instanceId;
        this.replyTimeout = replyTimeout;
    }

    public static void main(String[] args) {
        long instanceId = Long.parseLong(args[1]);
        int roundTrips = Integer.parseInt(args[2]);
        long seed = Long.parseLong(args[3]);
        SoakWorker soak = new SoakWorker(args[0], instanceId, Duration.ofMillis(Long.parseLong(args[4])));
        try {
            soak.worker.register();
            soak.worker.fill(JavaWorker.range(0, GEOMETRY.blocks()), seed);
            System.out.println("READY");
            System.out.flush();
            soak.run(roundTrips, new Random(seed));
            soak.call(2, pack(p -> p.packLong(instanceId)));
            System.out.println("DONE" + soak.counts.line());
            System.out.flush();
        } finally {
            soak.worker.close();
        }
    }

    private void run(int roundTrips, Random random) {
        long[] ringSeeds = new long[RING];
        long[] ringCrcs = new long[RING];
        int stored = 0;
        for (int i = 0; counts.get("round_trips") < roundTrips; i++) {
            if (System.nanoTime() - lastPingNs > PING_INTERVAL_NS) {
                call(22, pack(p -> p.packLong(instanceId)));
                lastPingNs = System.nanoTime();
            }
            long prefixSeed = random.nextLong();
            int[] tokens = JavaWorker.tokens(prefixSeed, 256);
            String requestId = "soak-" + instanceId + "-" + i;
            worker.stamp(SOURCE, prefixSeed);
            long crc = crc(worker.read(SOURCE));
            Boolean storeOk = transfer(call(6, worker.key(tokens, 0, 256, requestId, 0, 1, 1), pack(p -> p.packLong(instanceId)),
                    blockList(SOURCE), event()));
            if (Boolean.TRUE.equals(storeOk)) {
                counts.values[5]++;
                ringSeeds[stored % RING] = prefixSeed;
                ringCrcs[stored % RING] = crc;
                stored++;
            } else if (Boolean.FALSE.equals(storeOk)) {
                counts.values[6]++;
            }
            if (call(8, worker.key(tokens, 0, 256, requestId, null, 1, 1), pack(p -> p.packInt(1))) != null) {
                TestClient.Reply query = call(9, pack(p -> p.packString(requestId)));
                if (query != null && query.payload() != null && "01".equals(query.payloadHex())) {
                    counts.values[7]++;
                }
            }
            retrieve(tokens, requestId, TARGET, crc, 8, 9);
            if (stored > 1) {
                int back = 1 + random.nextInt(Math.min(stored, RING) - 1);
                int slot = (stored - 1 - back) % RING;
                retrieve(JavaWorker.tokens(ringSeeds[slot], 256), requestId + "-old", OLD_TARGET, ringCrcs[slot], 10, 11);
            }
            counts.values[0]++;
            if (counts.values[0] % 10 == 0) {
                System.out.println("P" + counts.line());
                System.out.flush();
            }
        }
    }

    /** RETRIEVE into {@code target} (zeroed first); a success must give back exactly the bytes stored. */
    private void retrieve(int[] tokens, String requestId, int[] target, long crc, int hitSlot, int missSlot) {
        worker.zero(target);
        Boolean ok = transfer(call(7, worker.key(tokens, 0, 256, requestId, 0, 1, 1), pack(p -> p.packLong(instanceId)),
                blockList(target), event(), pack(p -> p.packInt(0))));
        if (Boolean.TRUE.equals(ok)) {
            counts.values[hitSlot]++;
            if (crc(worker.read(target)) != crc) {
                counts.values[4]++;
                System.err.println("checksum mismatch: " + requestId);
            }
        } else if (Boolean.FALSE.equals(ok)) {
            counts.values[missSlot]++;
        }
    }

    /** The reply with this request's uid, or null (counted lost) when none comes in time; replies to earlier uids are late. */
    private TestClient.Reply call(int op, byte[]... payloads) {
        counts.values[1]++;
        int uid = client.send(op, payloads);
        String want = HEX.formatHex(pack(p -> p.packInt(uid)));
        long deadlineNs = System.nanoTime() + replyTimeout.toNanos();
        while (true) {
            long leftNs = deadlineNs - System.nanoTime();
            TestClient.Reply reply = leftNs <= 0 ? null : client.receive(Duration.ofNanos(leftNs));
            if (reply == null) {
                counts.values[2]++;
                System.err.println("no reply to op " + op + " uid " + uid + " within " + replyTimeout);
                return null;
            }
            if (want.equals(HEX.formatHex(reply.uid()))) {
                return reply;
            }
            counts.values[3]++;
        }
    }

    /** STORE/RETRIEVE's (event, ok): null when there was no reply; a reply of another shape is a mismatch. */
    private Boolean transfer(TestClient.Reply reply) {
        if (reply == null) {
            return null;
        }
        String hex = reply.payloadHex();
        if (hex == null || !hex.startsWith("92c440") || hex.length() != 6 + 128 + 2) {
            counts.values[4]++;
            System.err.println("not a (64-byte event, bool) reply: " + hex);
            return null;
        }
        return hex.endsWith("c3");
    }

    private static byte[] blockList(int[] blocks) {
        return pack(p -> {
            p.packArrayHeader(1).packArrayHeader(blocks.length);
            for (int block : blocks) {
                p.packInt(block);
            }
        });
    }

    private static byte[] event() {
        return pack(p -> p.packBinaryHeader(64).writePayload(ZERO_EVENT));
    }

    private static long crc(byte[] bytes) {
        CRC32 crc = new CRC32();
        crc.update(bytes);
        return crc.getValue();
    }
}
