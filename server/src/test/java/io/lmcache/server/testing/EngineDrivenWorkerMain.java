package io.lmcache.server.testing;

import java.util.concurrent.TimeUnit;

/**
 * An engine-driven worker process that dies mid-transfer: registers, reserves slots for a STORE it
 * never commits, pins the chunks of another prefix with a PREPARE_RETRIEVE it never finishes,
 * prints {@code READY} and waits to be killed. Never pings, so only its closed connection tells
 * the server it is gone.
 *
 * <p>Usage: {@code EngineDrivenWorkerMain <endpoint> <instanceId> <layers> <hidden> <storeSeed> <readSeed>}
 */
public final class EngineDrivenWorkerMain {
    private EngineDrivenWorkerMain() {}

    public static void main(String[] args) throws InterruptedException {
        String endpoint = args[0];
        long instanceId = Long.parseLong(args[1]);
        EngineDrivenWorker worker = new EngineDrivenWorker(endpoint, instanceId, "ed/model", Integer.parseInt(args[2]),
                Integer.parseInt(args[3]));
        worker.register();
        int[] store = JavaWorker.tokens(Long.parseLong(args[4]), 512);
        int reserved = worker.prepareStore(store, 0, 512, "dying").slots().size();
        int[] read = JavaWorker.tokens(Long.parseLong(args[5]), 512);
        if (worker.prepareRetrieve(read, 0, 512, "dying-read") == null) {
            throw new IllegalStateException("PREPARE_RETRIEVE of the other worker's chunks found nothing");
        }
        System.out.println("READY " + reserved);
        System.out.flush();
        while (true) {
            TimeUnit.SECONDS.sleep(1);
        }
    }
}
