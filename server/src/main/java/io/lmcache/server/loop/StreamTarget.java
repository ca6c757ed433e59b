package io.lmcache.server.loop;

import io.lmcache.server.peer.PeerId;

/** Where a stream's replies go: the request's peer, and its uid and op frames, echoed in every reply. */
public record StreamTarget(byte[] identity, byte[] uid, byte[] op) {
    /** One stream message {@code [identity, uid, op, payload]}; {@code payload} null = the final reply, which ends the stream. */
    public Outbound reply(byte[] payload) {
        return new Outbound(identity, uid, op, payload);
    }

    public PeerId peer() {
        return new PeerId(identity);
    }
}
