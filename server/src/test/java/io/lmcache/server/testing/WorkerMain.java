package io.lmcache.server.testing;

import java.util.concurrent.TimeUnit;

/**
 * A CPU worker process for liveness tests: registers a small KV cache in shared memory, stores one
 * chunk, prints {@code READY} and then pings every {@code pingMs} (0: never) until it is killed.
 * Killed with SIGKILL it leaves its segments in /dev/shm, as a real worker does.
 *
 * <p>Usage: {@code WorkerMain <endpoint> <instanceId> <pingMs>}
 */
public final class WorkerMain {
    private WorkerMain() {}

    public static void main(String[] args) throws InterruptedException {
        String endpoint = args[0];
        long instanceId = Long.parseLong(args[1]);
        long pingMs = Long.parseLong(args[2]);
        JavaWorker worker = new JavaWorker(endpoint, instanceId, "liveness/model", new JavaWorker.Geometry(2, 32, 16, 2, 64));
        worker.register();
        int[] blocks = JavaWorker.range(0, 16);
        worker.fill(blocks, instanceId);
        if (!worker.store(JavaWorker.tokens(instanceId, 256), 0, 256, blocks, "worker-" + instanceId)) {
            throw new IllegalStateException("the first STORE failed");
        }
        System.out.println("READY " + String.join(" ", worker.segments().stream().map(Object::toString).toList()));
        System.out.flush();
        while (true) {
            if (pingMs > 0) {
                worker.ping();
                TimeUnit.MILLISECONDS.sleep(pingMs);
            } else {
                TimeUnit.SECONDS.sleep(1);
            }
        }
    }
}
