package io.lmcache.server.loop;

import io.lmcache.server.config.StartupException;
import org.zeromq.ZMQ;
import org.zeromq.ZMQException;

/**
 * What a failed bind of the ROUTER says: JeroMQ's own message is a bare errno ({@code Errno 48}), so
 * the port in use, the common case, gets a refusal that names the port and says so, and any other
 * error its name.
 */
final class ZmqBindFailure {
    private ZmqBindFailure() {}

    static RuntimeException of(String endpoint, ZMQException e) {
        String port = endpoint.substring(endpoint.lastIndexOf(':') + 1);
        if (e.getErrorCode() == ZMQ.Error.EADDRINUSE.getCode()) {
            return new StartupException("--port " + port, "cannot bind the ZeroMQ ROUTER to " + endpoint + ": port " + port
                    + " is in use (another process listens on it; stop it or choose another --port)");
        }
        return new IllegalStateException("cannot bind the ZeroMQ ROUTER to " + endpoint + ": " + describe(e.getErrorCode()), e);
    }

    private static String describe(int code) {
        for (ZMQ.Error error : ZMQ.Error.values()) {
            if (error.getCode() == code) {
                return error.getMessage() + " (" + error.name() + ")";
            }
        }
        return "error " + code;
    }
}
