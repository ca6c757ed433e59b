package io.lmcache.server.testing;

import static io.lmcache.server.testing.TestClient.pack;

import io.lmcache.server.loop.Inbound;
import io.lmcache.server.protocol.Op;

/** Requests as the socket thread hands them to the dispatcher, for tests that drive a Dispatcher directly. */
public final class Inbounds {
    private static final byte[] IDENTITY = {0, 1, 2, 3, 4};

    private Inbounds() {}

    /** {@code [identity, uid, op, payloads...]}: the uid and the op id as msgpack ints. */
    public static Inbound of(Op op, int uid, byte[]... payloads) {
        return from(IDENTITY, op, uid, payloads);
    }

    /** As {@link #of}, from the peer whose ROUTER identity is {@code identity}. */
    public static Inbound from(byte[] identity, Op op, int uid, byte[]... payloads) {
        byte[][] frames = new byte[Inbound.FIRST_PAYLOAD + payloads.length][];
        frames[0] = identity.clone();
        frames[1] = pack(p -> p.packInt(uid));
        frames[2] = pack(p -> p.packInt(op.id()));
        System.arraycopy(payloads, 0, frames, Inbound.FIRST_PAYLOAD, payloads.length);
        return new Inbound(frames, frames.length, op, System.nanoTime());
    }
}
