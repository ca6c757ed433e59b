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

    /** Socket thread: a reply of the stream {@code (peer, uid)} was dropped (the peer does not read); must not block. */
    default void dropped(PeerId peer, byte[] uid) {
    }

    /** A JeroMQ I/O thread (the connection monitor): the peer's TCP connection closed; must not block or touch the socket. */
    default void connectionClosed(PeerId peer) {
    }
}
