package io.lmcache.server.l2.redis;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicBoolean;

/**
 * Per-node reachability and {@code INFO memory} for {@code /status}: every node is asked once a
 * second in the background (bounded by the request timeout), and status shows the last answers,
 * never waiting on a node that is down. Asking also keeps both connections' links to every master
 * open ({@link RedisLink#infoMemory}).
 */
final class NodeProbe {
    private static final long PERIOD_NS = TimeUnit.SECONDS.toNanos(1);
    /** The INFO memory fields status shows. */
    private static final Set<String> MEMORY_FIELDS = Set.of("used_memory", "used_memory_human", "used_memory_peak", "maxmemory",
            "maxmemory_human", "maxmemory_policy", "mem_fragmentation_ratio");

    /** One node's last answer: reachable, or the error that says why not. */
    record NodeState(RedisLink.Node node, boolean reachable, String error, Map<String, String> memory) {
        Map<String, Object> toStatus() {
            Map<String, Object> out = new LinkedHashMap<>();
            out.put("address", node.address());
            if (!node.nodeId().isEmpty()) {
                out.put("node_id", node.nodeId());
            }
            out.put("role", node.role());
            out.put("slots", node.slots());
            out.put("fail_flagged", node.failFlagged());
            out.put("reachable", reachable);
            out.put("error", error);
            out.put("memory", memory);
            return out;
        }
    }

    private final RedisLink link;
    private final ScheduledExecutorService scheduler;
    private final long timeoutNs;
    private final AtomicBoolean running = new AtomicBoolean();
    private volatile List<NodeState> last = List.of();

    NodeProbe(RedisLink link, ScheduledExecutorService scheduler, long timeoutNs) {
        this.link = link;
        this.scheduler = scheduler;
        this.timeoutNs = timeoutNs;
    }

    /** Probes every {@link #PERIOD_NS} on the scheduler, from now until it shuts down. */
    void start() {
        // runs on: the adapter's scheduler thread
        scheduler.scheduleWithFixedDelay(this::round, PERIOD_NS, PERIOD_NS, TimeUnit.NANOSECONDS);
    }

    private void round() {
        if (link.connections() != null && running.compareAndSet(false, true)) {
            try {
                probe();
            } catch (RuntimeException e) {
                running.set(false); // the next round tries again
            }
        }
    }

    /** The last round's answers (empty before the first). */
    List<NodeState> snapshot() {
        return last;
    }

    private void probe() {
        List<RedisLink.Node> nodes = link.nodes();
        List<CompletableFuture<NodeState>> answers = new ArrayList<>();
        for (RedisLink.Node node : nodes) {
            CompletableFuture<NodeState> answer = new CompletableFuture<>();
            try {
                scheduler.schedule(() -> answer.completeExceptionally(new TimeoutException("no answer within the request timeout")), timeoutNs,
                        TimeUnit.NANOSECONDS);
                link.infoMemory(node).whenComplete((info, error) -> answer.complete(error == null
                        ? new NodeState(node, true, "", memory(info)) : new NodeState(node, false, FailureLog.describe(error), Map.of())));
            } catch (RuntimeException e) {
                answer.completeExceptionally(e);
            }
            answers.add(answer.exceptionally(error -> new NodeState(node, false, FailureLog.describe(error), Map.of())));
        }
        // runs on: whichever thread answers last (a Lettuce I/O thread or the adapter's scheduler)
        CompletableFuture.allOf(answers.toArray(CompletableFuture[]::new)).whenComplete((ignored, error) -> {
            last = answers.stream().map(CompletableFuture::join).toList();
            running.set(false);
        });
    }

    /** The fields of {@link #MEMORY_FIELDS} from an {@code INFO memory} reply ({@code key:value} lines). */
    static Map<String, String> memory(String info) {
        Map<String, String> out = new LinkedHashMap<>();
        for (String line : info.split("\r?\n")) {
            int colon = line.indexOf(':');
            if (colon > 0 && MEMORY_FIELDS.contains(line.substring(0, colon))) {
                out.put(line.substring(0, colon), line.substring(colon + 1).strip());
            }
        }
        return out;
    }
}
