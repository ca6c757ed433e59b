package io.lmcache.server.l2.redis;

import io.lettuce.core.RedisException;
import io.lettuce.core.output.IntegerOutput;
import io.lettuce.core.output.StatusOutput;
import io.lettuce.core.protocol.Command;
import io.lettuce.core.protocol.CommandArgs;
import io.lettuce.core.protocol.CommandType;
import io.lmcache.server.l2.AdapterIo;
import io.lmcache.server.l2.AdapterLedger;
import io.lmcache.server.l2.KeyPage;
import io.lmcache.server.l2.L2Key;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ScheduledThreadPoolExecutor;
import java.util.concurrent.ThreadFactory;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.LongAdder;
import java.util.function.BiConsumer;
import java.util.function.Consumer;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The I/O of {@code resp} and {@code valkey} (hybrid-and-l2.md §B.8): each key's raw object bytes in Redis or
 * Valkey, one node or a cluster (slots spread evenly: the key has no hash tag). SET per key for a
 * store (a task fails if any key fails; the bytes count only keys written), a pipelined EXISTS per
 * key for a lookup (the server has no locks: the skeleton, {@link io.lmcache.server.l2.AsyncL2Adapter}, keeps them), GETRANGE per
 * key into the caller's buffer for a load (a nil or a reply of another length is a miss). Every command answers within
 * {@code request_timeout}: a node that is down fails its keys, so a LOOKUP sees a shorter prefix, and Lettuce reconnects when it
 * is back; a node that does not answer opens its circuit breaker ({@link NodeBreakers}). Holds no L1 state: the buffers it is
 * lent go back before their key answers ({@link LentBuffer}).
 */
public final class RedisIo implements AdapterIo {
    private static final Logger LOG = LoggerFactory.getLogger(RedisIo.class);
    private static final long CLOSE_WAIT_NS = TimeUnit.SECONDS.toNanos(5);

    private final RedisSpec spec;
    private final AdapterLedger ledger;
    private final String name;
    private final ScheduledThreadPoolExecutor scheduler;
    private final FailureLog failures;
    private final ReconnectLog reconnects;
    private final RedisLink link;
    private final NodeBreakers breakers;
    private final CommandSender sender;
    private final NodeProbe probe;
    private final ValueWindow window;
    private final LentBuffers<LentBuffer> lent = new LentBuffers<>();
    private final LongAdder storedKeys = new LongAdder();
    private final LongAdder lookupKeys = new LongAdder();
    private final LongAdder lookupHits = new LongAdder();
    private final LongAdder loadedKeys = new LongAdder();
    private final LongAdder loadMisses = new LongAdder();
    private final LongAdder loadTooBig = new LongAdder();
    private final LongAdder sizeMismatches = new LongAdder();

    /** Starts connecting in the background; its threads (Lettuce's I/O and timer, the adapter's scheduler) come from {@code threads}. */
    public RedisIo(RedisSpec spec, ThreadFactory threads, AdapterLedger ledger) {
        this.spec = spec;
        this.ledger = ledger;
        this.name = spec.type() + " " + spec.nodes();
        this.scheduler = new ScheduledThreadPoolExecutor(1, threads);
        scheduler.setRemoveOnCancelPolicy(true); // one backstop timer per command, nearly all cancelled
        this.failures = new FailureLog(LOG, name);
        this.reconnects = new ReconnectLog(LOG, name);
        this.link = new RedisLink(spec, name, threads, scheduler, failures, reconnects);
        this.breakers = new NodeBreakers(LOG, name, scheduler, link::ping, spec.requestTimeoutNs());
        this.sender = new CommandSender(scheduler, spec.requestTimeoutNs(), breakers);
        this.probe = new NodeProbe(link, scheduler, spec.requestTimeoutNs());
        this.window = new ValueWindow(spec.numWorkers(), scheduler);
        link.start();
        probe.start();
    }

    static String typeName(RedisSpec spec) {
        return spec.type().equals("resp") ? "RESPL2Adapter" : "ValkeyL2Adapter";
    }

    @Override
    public String typeName() {
        return typeName(spec);
    }

    /**
     * {@code [key_prefix@]model@{kv_rank:08x}@{og:x}@{hash hex}[@salt]}, LMCache's {@code ValkeyL2Adapter._wire_key} (LMCache/LMCache
     * {@code lmcache/v1/distributed/l2_adapters/valkey_l2_adapter.py}, index id 61981026160 @22d15507): no hash tag, so keys spread
     * over every slot.
     */
    String wireKey(L2Key key) {
        return wireKey(spec.keyPrefix(), key);
    }

    /** The key under {@code keyPrefix} ("" for none), as {@link #wireKey(L2Key)}. */
    static String wireKey(String keyPrefix, L2Key key) {
        return keyPrefix.isEmpty() ? key.wireKey() : keyPrefix + "@" + key.wireKey();
    }

    /**
     * SCAN over the masters in address order ({@code MATCH [prefix@]model@*}, {@code COUNT page_size}), each key's size by STRLEN.
     * The cursor is {@code master index:SCAN cursor}. SCAN's COUNT is a hint, so a page holds about {@code pageSize} entries (names
     * that are no LMCache key, or carry this server's block-order tag, are left out); a key present throughout is listed at least
     * once (SCAN's guarantee) while the cluster's masters stay the same. Blocks the caller, each step bounded.
     */
    @Override
    public KeyPage listKeys(String model, int pageSize, String cursor) {
        List<String> masters = link.masters();
        int node = 0;
        String scan = "0";
        if (cursor != null) {
            int colon = cursor.indexOf(':');
            if (colon < 1 || colon > 4 || !cursor.substring(0, colon).matches("\\d+") || !cursor.substring(colon + 1).matches("\\d{1,20}")) {
                throw new IllegalArgumentException("page_token is not one this adapter gave");
            }
            node = Integer.parseInt(cursor.substring(0, colon));
            scan = cursor.substring(colon + 1);
            if (node >= masters.size()) {
                throw new IllegalArgumentException("page_token names a node this cluster does not have");
            }
        }
        String prefix = spec.keyPrefix().isEmpty() ? "" : spec.keyPrefix() + "@";
        String pattern = glob(prefix) + (model == null ? "*" : glob(model) + "@*");
        RedisLink.Scanned scanned;
        try {
            scanned = link.scan(masters.get(node), scan, pattern, pageSize).get(2 * spec.requestTimeoutNs(), TimeUnit.NANOSECONDS);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException("interrupted while listing " + name, e);
        } catch (ExecutionException | TimeoutException e) {
            throw new IllegalStateException("SCAN on " + masters.get(node) + " failed: " + e.getCause(), e);
        }
        List<KeyPage.Entry> entries = new ArrayList<>(scanned.keys().size());
        for (int i = 0; i < scanned.keys().size(); i++) {
            String wire = scanned.keys().get(i);
            L2Key key = wire.startsWith(prefix) ? L2Key.parseWireKey(wire.substring(prefix.length())) : null;
            if (key != null && key.layoutTag() == 0) {
                entries.add(new KeyPage.Entry(key, scanned.sizes().get(i)));
            }
        }
        String next = scanned.nextCursor() != null ? node + ":" + scanned.nextCursor() : node + 1 < masters.size() ? (node + 1) + ":0" : null;
        return new KeyPage(entries, next);
    }

    /** {@code text} as a SCAN pattern matching itself only: glob's special characters escaped. */
    private static String glob(String text) {
        return text.replaceAll("([\\\\*?\\[\\]])", "\\\\$1");
    }

    /** Not connected (or closed): the whole task answers at once, counted once. */
    @Override
    public boolean accepts(Op op, int keys) {
        if (op == Op.LOOKUP) {
            lookupKeys.add(keys);
        }
        if (connections() != null) {
            return true;
        }
        failures.failed(ledger.closed() ? "closed" : "not_connected", keys, op.name().toLowerCase(Locale.ROOT) + " of " + keys + " key(s)",
                null);
        return false;
    }

    @Override
    public void store(L2Key key, MemorySegment object, Consumer<Stored> done) {
        LentBuffer value = lend(object);
        String wire = wireKey(key);
        window.submit(() -> {
            CommandArgs<String, LentBuffer> args = new CommandArgs<>(ValueCodec.INSTANCE).addKey(wire).addValue(value);
            if (spec.ttlMs() > 0) {
                args.add("PX").add(spec.ttlMs());
            }
            sendValue(wire, new Command<>(CommandType.SET, new StatusOutput<>(ValueCodec.INSTANCE), args), value, (reply, error) -> {
                if (error == null && "OK".equals(reply)) {
                    storedKeys.increment();
                    failures.succeeded();
                    done.accept(Stored.WROTE);
                } else {
                    failures.failed(error == null ? "store_reply" : CommandSender.reason(error), 1, "SET " + wire + (error == null ? " answered "
                            + reply : ""), error);
                    done.accept(Stored.FAILED);
                }
            });
        });
    }

    /** EXISTS per key, all sent before any answer (pipelined); a stored object of another size is found here and misses at load. */
    @Override
    public void lookup(List<L2Key> keys, Map<Integer, Long> objectBytesByGroup, KeyAnswers found) {
        RedisLink.Connections now = connections();
        for (int i = 0; i < keys.size(); i++) {
            int index = i;
            String wire = wireKey(keys.get(i));
            if (now == null) {
                found.answer(index, false); // closed since the task was taken
                continue;
            }
            CommandArgs<String, LentBuffer> args = new CommandArgs<>(ValueCodec.INSTANCE).addKey(wire);
            sender.send(now.control(), link.nodeOf(wire), new Command<>(CommandType.EXISTS, new IntegerOutput<>(ValueCodec.INSTANCE), args),
                    (count, error) -> {
                boolean hit = error == null && count != null && count == 1;
                if (hit) {
                    lookupHits.increment();
                } else if (error != null) {
                    failures.failed(CommandSender.reason(error), 1, "EXISTS " + wire, error);
                }
                found.answer(index, hit);
            });
        }
    }

    @Override
    public void load(List<L2Key> keys, List<MemorySegment> buffers, KeyAnswers loaded) {
        for (int i = 0; i < keys.size(); i++) {
            int index = i;
            LentBuffer target = lend(buffers.get(i));
            String wire = wireKey(keys.get(i));
            window.submit(() -> {
                // GETRANGE 0..size: at most one byte more than the object, so a larger value planted under the key is refused by
                // its length without being read (a GET would read all of it, holding the connection every other load shares)
                LoadOutput output = new LoadOutput(target);
                CommandArgs<String, LentBuffer> args = new CommandArgs<>(ValueCodec.INSTANCE).addKey(wire).add(0).add(target.size());
                sendValue(wire, new Command<>(CommandType.GETRANGE, output, args), target,
                        (outcome, error) -> loaded.answer(index, loaded(wire, target.size(), outcome, error)));
            });
        }
    }

    /** Whether a GETRANGE reply is the whole object; a miss is counted by why. */
    private boolean loaded(String wire, long bytes, LoadOutput.Outcome outcome, Throwable error) {
        if (error == null && outcome == LoadOutput.Outcome.HIT) {
            loadedKeys.increment();
            failures.succeeded();
            return true;
        }
        if (error == null && outcome == LoadOutput.Outcome.MISSING) {
            loadMisses.increment(); // gone since the lookup (expired, evicted, deleted by another server): a miss, not a fault
            return false;
        }
        if (error == null && outcome == LoadOutput.Outcome.TOO_BIG) {
            loadTooBig.increment();
        }
        if (error == null && (outcome == LoadOutput.Outcome.TOO_BIG || outcome == LoadOutput.Outcome.WRONG_SIZE)) {
            sizeMismatches.increment(); // another layout under this model name (or a stranger's value): a miss, the value kept
        }
        failures.failed(error != null ? CommandSender.reason(error) : loadReason(outcome), 1, "GETRANGE " + wire
                + (error == null ? " answered " + outcome + " for " + bytes + " bytes" : ""), error);
        return false;
    }

    // --- commands --------------------------------------------------------------------------------

    private RedisLink.Connections connections() {
        return ledger.closed() ? null : link.connections();
    }

    private LentBuffer lend(MemorySegment segment) {
        return lent.lend(new LentBuffer(segment));
    }

    /** A SET or GETRANGE on the values connection, holding a place in the window; the buffer goes back before {@code done} runs. */
    private <T> void sendValue(String wire, Command<String, LentBuffer, T> command, LentBuffer buffer, BiConsumer<T, Throwable> done) {
        RedisLink.Connections now = connections();
        BiConsumer<T, Throwable> giveBack = (value, error) -> {
            lent.giveBack(buffer);
            window.release();
            done.accept(value, error);
        };
        if (now == null) {
            giveBack.accept(null, new RedisException(ledger.closed() ? "the adapter is closed" : "not connected"));
            return;
        }
        sender.send(now.values(), link.nodeOf(wire), command, giveBack);
    }

    private static String loadReason(LoadOutput.Outcome outcome) {
        return switch (outcome) {
            case TOO_BIG -> "load_too_big";
            case WRONG_SIZE -> "load_wrong_size";
            default -> "timeout";
        };
    }

    // --- delete, status, close -------------------------------------------------------------------

    /** DEL on the control connection (closing too: persist_enabled false deletes after the drain); 0 means gone already. */
    @Override
    public void delete(L2Key key, Consumer<Deleted> done) {
        RedisLink.Connections now = link.connections();
        if (now == null) {
            done.accept(Deleted.FAILED);
            return;
        }
        String wire = wireKey(key);
        CommandArgs<String, LentBuffer> args = new CommandArgs<>(ValueCodec.INSTANCE).addKey(wire);
        sender.send(now.control(), link.nodeOf(wire), new Command<>(CommandType.DEL, new IntegerOutput<>(ValueCodec.INSTANCE), args),
                (count, error) -> {
            if (error == null && count != null) {
                // gone either way: 0 means it expired or another server deleted it first
                done.accept(count == 1 ? Deleted.REMOVED : Deleted.GONE);
            } else {
                failures.failed(CommandSender.reason(error), 1, "DEL " + wire, error);
                done.accept(Deleted.FAILED);
            }
        });
    }

    @Override
    public Map<String, Object> status() {
        Map<String, Object> status = RedisStatus.of(ledger.usage(), spec, link, probe.snapshot(), new RedisStatus.Counts(ledger.lockedKeys(),
                window.inFlight(), window.waiting(), storedKeys.sum(), lookupKeys.sum(), lookupHits.sum(), loadedKeys.sum(), loadMisses.sum()),
                failures);
        if (!breakers.openNodes().isEmpty()) {
            status.put("is_healthy", false); // a node that does not answer serves none of its keys
        }
        status.putAll(eventCounts());
        status.put("open_nodes", breakers.openNodes());
        status.put("breakers", breakers.status());
        status.put("unreachable_nodes", reconnects.status());
        return status;
    }

    /** Breaker, oversized-value and reconnect counters (the server's metrics read these on each scrape). */
    @Override
    public Map<String, Long> eventCounts() {
        Map<String, Long> counts = new LinkedHashMap<>(breakers.counters());
        counts.put("load_too_big", loadTooBig.sum());
        counts.put("format_mismatch_size", sizeMismatches.sum());
        counts.put("reconnect_attempts_failed", reconnects.failedAttempts());
        return counts;
    }

    NodeBreakers breakers() {
        return breakers;
    }

    /**
     * Values still waiting fail at once; those in flight get {@link #CLOSE_WAIT_NS} to answer; then every buffer still lent goes
     * back (no copy touches L1 after this returns).
     */
    @Override
    public void drain() {
        window.close().forEach(Runnable::run);
        lent.drain(LOG, name, CLOSE_WAIT_NS);
    }

    /** The connections and threads end. */
    @Override
    public void release() {
        link.close();
        scheduler.shutdownNow();
    }
}
