package io.lmcache.server.loop;

import io.lmcache.server.peer.PeerId;

/**
 * What the socket thread tells the owner of streaming replies: a control frame {@code [identity, uid, b"", command]} (LMCache's
 * {@code ack} and {@code cancel}; an empty op frame is never a malformed request), and a peer that a reply could not reach
 * (ROUTER_MANDATORY: the peer is gone). Both run on the socket thread and must not block.
 */
public interface StreamControl {
    StreamControl NONE = new StreamControl() {
        @Override
        public void control(PeerId peer, byte[] uid, byte[] command) {
        }

        @Override
        public void undeliverable(PeerId peer) {
        }
    };

    void control(PeerId peer, byte[] uid, byte[] command);

    void undeliverable(PeerId peer);
}
