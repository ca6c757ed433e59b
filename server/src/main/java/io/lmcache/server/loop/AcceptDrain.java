package io.lmcache.server.loop;

import java.io.IOException;
import java.nio.channels.FileChannel;
import java.nio.channels.ServerSocketChannel;
import java.nio.channels.SocketChannel;
import java.nio.file.Path;

/**
 * Keeps JeroMQ's accept loop from spinning when the process is out of descriptors. JeroMQ's
 * listener, when {@code accept} fails, reports the failure and returns (TcpListener: "TODO: Handle
 * specific errors like ENFILE/EMFILE"): the connection stays in the listen backlog, the listening
 * socket stays readable and the I/O thread retries at once, forever (the red team saw it at 60% of
 * a core). This holds one spare descriptor; on such a failure it gives the spare up, accepts and
 * closes what waits in the backlog, and takes the spare again. Those peers are refused, not served,
 * but the loop waits for the next connection again. Runs on the ROUTER's I/O thread only (the
 * socket event hook).
 */
final class AcceptDrain {
    /** One failure drains at most this many waiting connections (a listen backlog holds a few hundred). */
    static final int MAX_DRAINED = 4096;

    private ServerSocketChannel listener;
    private FileChannel spare;

    AcceptDrain() {
        spare = openSpare();
    }

    /** The ROUTER's listening channel, from its listening event. */
    void listening(ServerSocketChannel channel) {
        listener = channel;
    }

    /** accept() failed: closes every connection waiting in the backlog; returns how many. */
    int drain() {
        if (listener == null) {
            return 0;
        }
        closeSpare();
        int drained = 0;
        try {
            SocketChannel waiting;
            while (drained < MAX_DRAINED && (waiting = listener.accept()) != null) {
                waiting.close();
                drained++;
            }
        } catch (IOException e) {
            // still no descriptor, or the listener closed: what is left waits for the next event
        }
        spare = openSpare();
        return drained;
    }

    private void closeSpare() {
        if (spare != null) {
            try {
                spare.close();
            } catch (IOException e) {
                // a descriptor of /dev/null: nothing to lose
            }
            spare = null;
        }
    }

    private static FileChannel openSpare() {
        try {
            return FileChannel.open(Path.of("/dev/null"));
        } catch (IOException | UnsupportedOperationException e) {
            return null;
        }
    }

    void close() {
        closeSpare();
    }
}
