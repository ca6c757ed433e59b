package io.lmcache.server.testing;

import static io.lmcache.server.testing.TestClient.pack;

import io.lmcache.server.protocol.Op;
import io.lmcache.server.protocol.ProtocolException;
import io.lmcache.server.protocol.RequestDecoder;
import java.util.Arrays;
import java.util.EnumSet;
import java.util.HexFormat;
import java.util.List;
import java.util.Random;
import java.util.Set;

/**
 * Malformed requests as a hostile or broken local peer sends them, each with what the server must
 * do about it ({@link Outcome}): shared by BadInputIT (one of each), FuzzIT (10^5 mixed) and the
 * flood benchmark in bench/ (10^6). Frames are as a DEALER sends them: {@code [uid, op, payload...]}.
 *
 * <p>Not thread-safe (one per thread): it keeps an op decoder and a uid counter.
 */
public final class MalformedMessages {
    /** A pickle that calls {@code os.system("echo pwned")} when loaded: REGISTER must refuse it unread. */
    public static final byte[] OS_SYSTEM_PICKLE =
            HexFormat.of().parseHex("80049525000000000000008c05706f736978948c0673797374656d9493948c0a6563686f2070776e656494859452942e");

    /**
     * The ops the server declares unsupported (ServerOps.declareUnsupported): no reply, a counter. Kept
     * here rather than read from the op table, which cannot be built without the modules.
     */
    public static final Set<Op> UNSUPPORTED = EnumSet.of(Op.REGISTER_Q_CACHE, Op.UNREGISTER_Q_CACHE, Op.STORE_Q, Op.CB_REGISTER_ROPE,
            Op.CB_UNREGISTER_ROPE, Op.CB_RETRIEVE_PRE_COMPUTED, Op.CB_UNIFIED_LOOKUP, Op.CB_PROTOCOL_HANDSHAKE, Op.P2P_LOOKUP_AND_LOCK,
            Op.P2P_QUERY_LOOKUP_RESULTS, Op.P2P_UNLOCK_OBJECTS);
    /** Ops answered by a stream of replies (subscribe_kv_events): not one reply per request, so not fuzzed here (KvEventsIT). */
    private static final Set<Op> STREAMED = EnumSet.of(Op.SUBSCRIBE_KV_EVENTS);
    /** The ops a fuzzed message may name. */
    private static final List<Op> FUZZED = Arrays.stream(Op.values()).filter(op -> !STREAMED.contains(op)).toList();

    /** Served ops that read at least one payload frame (the others ignore their payloads). */
    private static final List<Op> WITH_PAYLOAD = FUZZED.stream()
            .filter(op -> !UNSUPPORTED.contains(op) && op != Op.GET_CHUNK_SIZE && op != Op.NOOP && op != Op.GET_EXPERIMENTAL).toList();
    /** Ops whose first payload frame is required: without it the request cannot be decoded. */
    private static final List<Op> FIRST_FRAME_REQUIRED = List.of(Op.REGISTER_KV_CACHE, Op.UNREGISTER_KV_CACHE, Op.STORE, Op.RETRIEVE,
            Op.LOOKUP, Op.QUERY_PREFETCH_STATUS, Op.FREE_LOOKUP_LOCKS, Op.PREPARE_STORE, Op.COMMIT_STORE, Op.PREPARE_RETRIEVE,
            Op.COMMIT_RETRIEVE);
    private static final List<Op> UNSUPPORTED_LIST = List.copyOf(UNSUPPORTED);
    /** Below any sane frame cap (the largest real request is a few MiB) and still far above a real key. */
    public static final int LARGE_FRAME_BYTES = 1 << 20;

    /** What the server must do with a message. */
    public enum Outcome {
        /** Fewer than uid and op: nothing to correlate; {@code bad_requests{reason="fewer_than_3_frames"}}, no reply. */
        SHORT(false),
        /** An empty op frame with a payload: a stream's control frame, ignored without a counter or a reply. */
        CONTROL(false),
        /** The op frame names no op: {@code unknown_ops}, no reply. */
        UNKNOWN_OP(false),
        /** A known op of a feature the server lacks: {@code unsupported_ops}, no reply. */
        UNSUPPORTED(false),
        /** Cannot be decoded: a {@code bad_requests} reason, and the op's failure value as the reply. */
        DECODE_FAILS(true),
        /** A pickle naming a forbidden callable: {@code bad_requests{reason="pickle_rejected"}} and the failure value. */
        PICKLE_REJECTED(true),
        /** A wrapper of another extension type: {@code bad_requests{reason="bad_extension"}} and the failure value. */
        BAD_EXTENSION(true),
        /** A served op whose payload may or may not decode (random bytes, depth bombs): exactly one reply either way. */
        REPLY(true);

        private final boolean replied;

        Outcome(boolean replied) {
            this.replied = replied;
        }

        public boolean replied() {
            return replied;
        }
    }

    /** One message: what kind it is, its frames, and what the server must do. */
    public record Message(String kind, byte[][] frames, Outcome outcome) {
        public long bytes() {
            long sum = 0;
            for (byte[] frame : frames) {
                sum += frame.length;
            }
            return sum;
        }
    }

    private final Random random;
    private final RequestDecoder opDecoder = new RequestDecoder();
    private int nextUid;

    public MalformedMessages(long seed) {
        this.random = new Random(seed);
    }

    /** The next message of a deterministic mix of every kind. */
    public Message next() {
        int pick = random.nextInt(1000);
        if (pick < 300) {
            return randomFrames();
        } else if (pick < 450) {
            return wrongTypes();
        } else if (pick < 550) {
            return truncated();
        } else if (pick < 650) {
            return hugeLength();
        } else if (pick < 700) {
            return forbiddenPickle();
        } else if (pick < 730) {
            return badExtension();
        } else if (pick < 790) {
            return depthBomb();
        } else if (pick < 860) {
            return unknownOp();
        } else if (pick < 900) {
            return unsupportedOp();
        } else if (pick < 999) {
            return tooFewFrames();
        }
        return largeFrame();
    }

    /** 1..6 frames of random bytes (often a valid op, so the payload decoders see the garbage too); outcome by the frames. */
    public Message randomFrames() {
        byte[][] frames = new byte[1 + random.nextInt(6)][];
        for (int f = 0; f < frames.length; f++) {
            frames[f] = new byte[random.nextInt(48)];
            random.nextBytes(frames[f]);
        }
        if (frames.length > 1 && random.nextBoolean()) {
            frames[1] = opFrame(FUZZED.get(random.nextInt(FUZZED.size())));
        }
        return new Message("random frames", frames, classify(frames));
    }

    /** Every payload frame of a served op holds a type no field of any op takes (float, or an ext of type 7). */
    public Message wrongTypes() {
        Op op = WITH_PAYLOAD.get(random.nextInt(WITH_PAYLOAD.size()));
        byte[][] payloads = new byte[1 + random.nextInt(4)][];
        for (int i = 0; i < payloads.length; i++) {
            payloads[i] = random.nextBoolean() ? pack(p -> p.packDouble(random.nextDouble()))
                    : pack(p -> p.packExtensionTypeHeader((byte) 7, 2).writePayload(new byte[2]));
        }
        return message("wrong types", op, Outcome.DECODE_FAILS, payloads);
    }

    /** A valid LOOKUP key, STORE or REGISTER payload cut short. */
    public Message truncated() {
        return switch (random.nextInt(3)) {
            case 0 -> message("truncated msgpack", Op.LOOKUP, Outcome.DECODE_FAILS, cut(lookupKey("fuzz-trunc", 64)), pack(p -> p.packInt(1)));
            case 1 -> message("truncated msgpack", Op.STORE, Outcome.DECODE_FAILS, cut(lookupKey("fuzz-trunc", 64)), pack(p -> p.packLong(7)),
                    cut(pack(p -> p.packArrayHeader(1).packArrayHeader(4).packInt(0).packInt(1).packInt(2).packInt(3))));
            default -> message("truncated msgpack", Op.REGISTER_KV_CACHE, Outcome.DECODE_FAILS, pack(p -> p.packLong(7)),
                    cut(pack(p -> p.packArrayHeader(1).packExtensionTypeHeader((byte) 1, 40).writePayload(new byte[40]))));
        };
    }

    /** A str, bin, array, map or ext header declaring 4 GiB (0xffffffff) with a few bytes behind it. */
    public Message hugeLength() {
        byte[] str = HexFormat.of().parseHex("dbffffffff616263");
        byte[] bin = HexFormat.of().parseHex("c6ffffffff00010203");
        return switch (random.nextInt(6)) {
            case 0 -> message("4 GiB length", Op.QUERY_PREFETCH_STATUS, Outcome.DECODE_FAILS, str);
            case 1 -> message("4 GiB length", Op.LOOKUP, Outcome.DECODE_FAILS, pack(p -> {
                p.packMapHeader(2).packString("model_name");
                p.writePayload(str);
                p.packString("world_size").packInt(1);
            }), pack(p -> p.packInt(1)));
            case 2 -> message("4 GiB length", Op.LOOKUP, Outcome.DECODE_FAILS, HexFormat.of().parseHex("dfffffffffa17801"));
            case 3 -> message("4 GiB length", Op.STORE, Outcome.DECODE_FAILS, lookupKey("fuzz-huge", 16), pack(p -> p.packLong(7)),
                    HexFormat.of().parseHex("91ddffffffff0102"), bin);
            case 4 -> message("4 GiB length", Op.REGISTER_KV_CACHE, Outcome.DECODE_FAILS, pack(p -> p.packLong(7)),
                    HexFormat.of().parseHex("91c9ffffffff0180"), pack(p -> p.packString("m")));
            default -> message("4 GiB length", Op.END_SESSION, Outcome.DECODE_FAILS, pack(p -> p.packString("fuzz")), bin);
        };
    }

    /** REGISTER whose one wrapper is a pickle naming os.system. */
    public Message forbiddenPickle() {
        byte[] wrappers = pack(p -> p.packArrayHeader(1).packExtensionTypeHeader((byte) 1, OS_SYSTEM_PICKLE.length).writePayload(OS_SYSTEM_PICKLE));
        return message("forbidden pickle", Op.REGISTER_KV_CACHE, Outcome.PICKLE_REJECTED, pack(p -> p.packLong(43)), wrappers,
                pack(p -> p.packString("m")));
    }

    /** REGISTER whose wrapper has extension type 9. */
    public Message badExtension() {
        byte[] wrappers = pack(p -> p.packArrayHeader(1).packExtensionTypeHeader((byte) 9, 4).writePayload(new byte[4]));
        return message("bad extension", Op.REGISTER_KV_CACHE, Outcome.BAD_EXTENSION, pack(p -> p.packLong(42)), wrappers,
                pack(p -> p.packString("m")));
    }

    /** Arrays or maps nested 1 000..60 000 deep, where the decoder skips or walks a value it does not know the shape of. */
    public Message depthBomb() {
        int depth = 1_000 + random.nextInt(59_000);
        boolean maps = random.nextBoolean();
        byte[] bomb = new byte[maps ? depth * 3 + 1 : depth + 1];
        for (int i = 0; i < depth; i++) {
            if (maps) {
                // {"k": {"k": ...}}
                bomb[3 * i] = (byte) 0x81;
                bomb[3 * i + 1] = (byte) 0xa1;
                bomb[3 * i + 2] = 'k';
            } else {
                bomb[i] = (byte) 0x91;
            }
        }
        bomb[bomb.length - 1] = (byte) 0xc0;
        // as the value of a field the decoder does not know, which it skips without knowing its shape
        byte[] field = concat(pack(p -> p.packMapHeader(1).packString("fuzz_unknown_field")), bomb);
        return switch (random.nextInt(4)) {
            case 0 -> message("depth bomb", Op.END_SESSION, Outcome.REPLY, pack(p -> p.packString("fuzz-bomb")), bomb);
            case 1 -> message("depth bomb", Op.LOOKUP, Outcome.REPLY, field, pack(p -> p.packInt(1)));
            case 2 -> message("depth bomb", Op.REGISTER_KV_CACHE, Outcome.REPLY, pack(p -> p.packLong(44)), pack(p -> p.packArrayHeader(0)),
                    pack(p -> p.packString("m")), pack(p -> p.packInt(1)), pack(p -> p.packString("vllm")), field);
            default -> message("depth bomb", Op.REPORT_BLOCK_ALLOCATION, Outcome.REPLY, pack(p -> p.packLong(45)), pack(p -> p.packString("m")),
                    concat(pack(p -> p.packArrayHeader(1)), field));
        };
    }

    private static byte[] concat(byte[] head, byte[] tail) {
        byte[] out = Arrays.copyOf(head, head.length + tail.length);
        System.arraycopy(tail, 0, out, head.length, tail.length);
        return out;
    }

    /** An op frame that names nothing: out of range, negative, an unknown name, nil, a float, empty or cut. */
    public Message unknownOp() {
        byte[] op = switch (random.nextInt(8)) {
            case 0 -> pack(p -> p.packInt(Op.MAX_ID + 1 + random.nextInt(1000)));
            case 1 -> pack(p -> p.packInt(0));
            case 2 -> pack(p -> p.packLong(-1L - random.nextInt(1 << 20)));
            case 3 -> pack(p -> p.packString("no_such_op_" + random.nextInt(100)));
            case 4 -> pack(p -> p.packNil());
            case 5 -> pack(p -> p.packDouble(6.0));
            case 6 -> new byte[0];
            default -> HexFormat.of().parseHex("cd01");
        };
        // an empty op frame with a payload is a stream's control frame ([uid, b"", command]): ignored, not an unknown op
        return new Message("unknown op", new byte[][] {uid(), op, pack(p -> p.packInt(1))}, op.length == 0 ? Outcome.CONTROL : Outcome.UNKNOWN_OP);
    }

    /** A known op of a feature the server does not provide, with a random payload. */
    public Message unsupportedOp() {
        byte[] payload = new byte[random.nextInt(16)];
        random.nextBytes(payload);
        return message("unsupported op", UNSUPPORTED_LIST.get(random.nextInt(UNSUPPORTED_LIST.size())), Outcome.UNSUPPORTED, payload);
    }

    /** Only a uid frame (no op), or a served op without the payload frame it needs. */
    public Message tooFewFrames() {
        if (random.nextBoolean()) {
            return new Message("too few frames", new byte[][] {uid()}, Outcome.SHORT);
        }
        return message("too few frames", FIRST_FRAME_REQUIRED.get(random.nextInt(FIRST_FRAME_REQUIRED.size())), Outcome.DECODE_FAILS);
    }

    /** A 1 MiB frame where a LOOKUP key belongs: a bin, not a map. */
    public Message largeFrame() {
        byte[] big = new byte[LARGE_FRAME_BYTES - 5];
        random.nextBytes(big);
        return message("1 MiB frame", Op.LOOKUP, Outcome.DECODE_FAILS, pack(p -> p.packBinaryHeader(big.length).writePayload(big)),
                pack(p -> p.packInt(1)));
    }

    /** A LOOKUP key (IPCCacheServerKey, worker_id nil) over {@code tokens} token ids, as the client encodes it. */
    public static byte[] lookupKey(String requestId, int tokens) {
        return pack(p -> {
            p.packMapHeader(10);
            p.packString("model_name").packString("test/model");
            p.packString("world_size").packInt(1);
            p.packString("worker_id").packNil();
            p.packString("token_ids").packArrayHeader(tokens);
            for (int i = 0; i < tokens; i++) {
                p.packInt(i);
            }
            p.packString("start").packInt(0);
            p.packString("end").packInt(tokens);
            p.packString("request_id").packString(requestId);
            p.packString("cache_salt").packString("");
            p.packString("request_configs").packNil();
            p.packString("num_kv_readers").packInt(1);
        });
    }

    /** What the server does with these frames as far as the op frame decides it (random frames). */
    private Outcome classify(byte[][] frames) {
        if (frames.length < 2) {
            return Outcome.SHORT;
        }
        if (frames[1].length == 0 && frames.length > 2) {
            return Outcome.CONTROL; // [uid, b"", command]: a stream's control frame (kv-events.md §2), never counted as malformed
        }
        Op op;
        try {
            op = opDecoder.decodeOp(frames[1]);
        } catch (ProtocolException e) {
            return Outcome.UNKNOWN_OP;
        }
        if (op == null) {
            return Outcome.UNKNOWN_OP;
        }
        return UNSUPPORTED.contains(op) ? Outcome.UNSUPPORTED : Outcome.REPLY;
    }

    private byte[] cut(byte[] valid) {
        return Arrays.copyOf(valid, random.nextInt(valid.length));
    }

    private Message message(String kind, Op op, Outcome outcome, byte[]... payloads) {
        byte[][] frames = new byte[2 + payloads.length][];
        frames[0] = uid();
        frames[1] = opFrame(op);
        System.arraycopy(payloads, 0, frames, 2, payloads.length);
        return new Message(kind, frames, outcome);
    }

    private byte[] uid() {
        int uid = nextUid++;
        return pack(p -> p.packInt(uid));
    }

    /** The op as its frozen id, or now and then as its E4 name (both are valid); an op added after the frozen table has only its name. */
    private byte[] opFrame(Op op) {
        return op.id() == 0 || random.nextInt(8) == 0 ? pack(p -> p.packString(op.wireName())) : pack(p -> p.packInt(op.id()));
    }
}
