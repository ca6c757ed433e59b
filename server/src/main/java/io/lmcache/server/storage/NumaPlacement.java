package io.lmcache.server.storage;

import io.lmcache.server.agent.NamedThreads;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.BitSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.function.IntFunction;
import java.util.Locale;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Where the pool's regions live on a host with several NUMA nodes ({@code --numa-placement auto}): region {@code r} on
 * the node of GPU {@code r mod G} (the GPUs whose node sysfs names, in device order), so each GPU's node holds its share
 * of the pool. Placed before the region's first touch: {@code mbind(MPOL_PREFERRED)} on the untouched range, or, where
 * the kernel refuses mbind (a container without {@code CAP_SYS_NICE}: Docker's default seccomp profile allows mbind only
 * with it), by first touch: the preparation thread that prefaults the region binds itself to the node's CPUs first.
 * On a host with one node, with no GPU node known, or with {@code off}, nothing is done and nothing changes.
 *
 * <p>Which region a STORE lands in is still the allocator's choice: this places the pool, it does not steer a GPU's
 * objects to its own node's regions (open: ObjectStore.reserve would need the worker's node).
 */
public final class NumaPlacement {
    private static final Logger LOG = LoggerFactory.getLogger(NumaPlacement.class);

    /** How regions are placed. */
    public enum Method { NONE, MBIND, FIRST_TOUCH }

    private final int[] regionNode;
    private final NumaTopology topology;
    private final NumaCalls calls;
    private volatile Method method;
    private volatile String message;
    private final int[] failedBinds = new int[1];

    private NumaPlacement(int[] regionNode, NumaTopology topology, NumaCalls calls, Method method, String message) {
        this.regionNode = regionNode;
        this.topology = topology;
        this.calls = calls;
        this.method = method;
        this.message = message;
    }

    /** Nothing placed (host-only tests, and {@code off}). */
    public static NumaPlacement none(String why) {
        return new NumaPlacement(new int[0], null, null, Method.NONE, why);
    }

    /**
     * Decides the placement of {@code regions} regions for the GPUs with these PCI bus ids (device order). Makes no call
     * that changes anything: {@link #probe} then finds out how the kernel lets us place.
     */
    public static NumaPlacement plan(boolean enabled, NumaTopology topology, List<String> gpuBusIds, int regions, NumaCalls calls) {
        if (!enabled) {
            return none("off (--numa-placement off)");
        }
        if (topology.nodeCount() <= 1) {
            return none("one NUMA node: the pool is placed as before");
        }
        List<Integer> gpuNodes = new ArrayList<>();
        for (String id : gpuBusIds) {
            int node = topology.gpuNode(id);
            if (node >= 0 && !topology.nodeCpus().get(node).isEmpty()) {
                gpuNodes.add(node);
            }
        }
        if (gpuNodes.isEmpty()) {
            return none(topology.nodeCount() + " NUMA nodes but no GPU whose node sysfs names: the pool is placed as before");
        }
        int[] nodes = new int[regions];
        for (int region = 0; region < regions; region++) {
            nodes[region] = gpuNodes.get(region % gpuNodes.size());
        }
        return new NumaPlacement(nodes, topology, calls, Method.MBIND, topology.nodeCount() + " NUMA nodes; GPUs on nodes " + gpuNodes);
    }

    /**
     * Before the preparation starts: one mbind on the first region tells whether the kernel lets us set policies; if not,
     * first touch from bound threads, if the kernel lets us bind threads, else nothing. Logs the outcome in one line.
     */
    public void probe(IntFunction<MemorySegment> slices) {
        if (method == Method.NONE) {
            LOG.info("NUMA placement of the L1 pool: {}", message);
            return;
        }
        int errno = calls.preferNode(slices.apply(0), regionNode[0]);
        if (errno != 0) {
            int bindErrno = probeBind(topology.nodeCpus().get(regionNode[0]));
            if (bindErrno == 0) {
                method = Method.FIRST_TOUCH;
                message += "; mbind refused (errno " + errno + (errno == NumaCalls.EPERM ? ", no CAP_SYS_NICE in this container?" : "")
                        + "): placing by first touch from preparation threads bound to each node's CPUs";
            } else {
                method = Method.NONE;
                message += "; neither mbind (errno " + errno + ") nor sched_setaffinity (errno " + bindErrno
                        + ") is allowed: the pool is placed as before";
            }
        }
        LOG.info("NUMA placement of the L1 pool: {} ({})", method.name().toLowerCase(Locale.ROOT), message);
    }

    /** On the preparation thread, just before it prefaults the region (its first touch). */
    public void beforeFirstTouch(int region, MemorySegment slice) {
        Method now = method;
        if (now == Method.NONE || region >= regionNode.length) {
            return;
        }
        int node = regionNode[region];
        int errno = now == Method.MBIND ? calls.preferNode(slice, node) : calls.bindThread(topology.nodeCpus().get(node));
        if (errno != 0) {
            synchronized (failedBinds) {
                if (failedBinds[0]++ == 0) {
                    LOG.warn("NUMA placement of region {} on node {} failed (errno {}); such regions are placed by the kernel", region,
                            node, errno);
                }
            }
        }
    }

    /** Tries a thread binding on a thread of its own, so the start-up thread keeps its CPUs. */
    private int probeBind(BitSet cpus) {
        int[] errno = {NumaCalls.ENOSYS};
        // runs on: lmcache-numa-probe (one-shot, joined at once)
        Thread probe = NamedThreads.thread("lmcache-numa-probe", true, () -> errno[0] = calls.bindThread(cpus));
        probe.start();
        try {
            probe.join();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        return errno[0];
    }

    public Method method() {
        return method;
    }

    /** The node each region was placed on ({@code -1} for all when nothing is placed). */
    public int regionNode(int region) {
        return method == Method.NONE || region >= regionNode.length ? -1 : regionNode[region];
    }

    /** What /status shows: the method, why, and each region's node. */
    public Map<String, Object> status(int regions) {
        Map<String, Object> status = new LinkedHashMap<>();
        status.put("method", method.name().toLowerCase(Locale.ROOT));
        status.put("message", message);
        List<Integer> nodes = new ArrayList<>(regions);
        for (int region = 0; region < regions; region++) {
            nodes.add(regionNode(region));
        }
        status.put("region_nodes", nodes);
        synchronized (failedBinds) {
            status.put("failed_placements", failedBinds[0]);
        }
        return status;
    }
}
