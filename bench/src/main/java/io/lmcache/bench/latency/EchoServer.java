package io.lmcache.bench.latency;

import org.zeromq.SocketType;
import org.zeromq.ZContext;
import org.zeromq.ZMQ;

/**
 * The latency baseline: the least a JeroMQ ROUTER server can do per request. One thread, blocking
 * receive, and the reply is {@code [identity, uid, op]} echoed back (payload frames are read and
 * dropped). Whatever the real server adds on top of this is its own request path.
 *
 * <p>Usage: {@code EchoServer <port>}; prints "echo ready" once bound. Stopped by SIGTERM.
 */
public final class EchoServer {
    private EchoServer() {}

    public static void main(String[] args) {
        int port = Integer.parseInt(args[0]);
        try (ZContext context = new ZContext(1)) {
            ZMQ.Socket router = context.createSocket(SocketType.ROUTER);
            router.setLinger(0);
            // the same queue limits as the real server's ROUTER, so neither side gets deeper queues
            router.setSndHWM(100_000);
            router.setRcvHWM(10_000);
            router.bind("tcp://127.0.0.1:" + port);
            System.out.println("echo ready on port " + port);
            System.out.flush();
            while (!Thread.currentThread().isInterrupted()) {
                byte[] identity = router.recv(0);
                byte[] uid = router.hasReceiveMore() ? router.recv(0) : null;
                byte[] op = router.hasReceiveMore() ? router.recv(0) : null;
                while (router.hasReceiveMore()) {
                    router.recv(0);
                }
                if (identity == null || uid == null || op == null) {
                    continue; // malformed: nothing to correlate a reply with
                }
                router.send(identity, ZMQ.SNDMORE);
                router.send(uid, ZMQ.SNDMORE);
                router.send(op, 0);
            }
        }
    }
}
