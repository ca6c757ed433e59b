package io.lmcache.server.loop;

import io.lmcache.server.peer.PeerId;
import io.lmcache.server.protocol.Op;

/**
 * One request as the ROUTER received it: {@code frames[0]} identity, {@code [1]} uid, {@code [2]}
 * op, then the payload frames up to {@code frameCount}. The uid and op frames are echoed back byte
 * for byte.
 */
public record Inbound(byte[][] frames, int frameCount, Op op, long receivedNs) {
    public static final int FIRST_PAYLOAD = 3;

    public byte[] identity() {
        return frames[0];
    }

    public byte[] uid() {
        return frames[1];
    }

    public byte[] opFrame() {
        return frames[2];
    }

    public int payloadCount() {
        return frameCount - FIRST_PAYLOAD;
    }

    /** The payload frames' total size. */
    public long payloadBytes() {
        long bytes = 0;
        for (int i = FIRST_PAYLOAD; i < frameCount; i++) {
            bytes += frames[i].length;
        }
        return bytes;
    }

    public PeerId peer() {
        return new PeerId(frames[0]);
    }
}
