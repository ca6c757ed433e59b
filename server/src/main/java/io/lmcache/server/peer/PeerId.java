package io.lmcache.server.peer;

import java.util.Arrays;
import java.util.HexFormat;

/** A client connection's ZeroMQ identity (the ROUTER's first frame), compared by content. */
public record PeerId(byte[] bytes) {
    @Override
    public boolean equals(Object other) {
        return other instanceof PeerId peer && Arrays.equals(bytes, peer.bytes);
    }

    @Override
    public int hashCode() {
        return Arrays.hashCode(bytes);
    }

    @Override
    public String toString() {
        return HexFormat.of().formatHex(bytes);
    }
}
