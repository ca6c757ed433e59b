package io.lmcache.server.assembly;

import io.lmcache.server.agent.Agent;
import io.lmcache.server.agent.CloseHelper;
import java.util.ArrayList;
import java.util.EnumMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Set;
import java.util.function.Supplier;

/**
 * The server from its parts (LMCache's module creator, Aeron's {@code MediaDriver.Context}): opens the parts in dependency
 * order (each after the parts its {@link Part#after} names; otherwise in list order), {@link #conclude}s (no wiring after
 * it), {@link #start}s what the parts registered to start, and closes everything last opened first, one failing close never
 * skipping the rest. Every part's {@code /status} block is read through {@link #status}.
 */
public final class Assembly implements AutoCloseable {
    /** What was opened or offered, in opening order. */
    private final List<Object> objects = new ArrayList<>();
    private final List<String> opened = new ArrayList<>();
    private final List<String> off = new ArrayList<>();
    private final List<AutoCloseable> closers = new ArrayList<>();
    private final List<Named<Runnable>> starts = new ArrayList<>();
    private final List<Named<Runnable>> serves = new ArrayList<>();
    private final Map<String, Supplier<Map<String, Object>>> statuses = new LinkedHashMap<>();
    private final Map<Build.Role, List<Agent>> agents = new EnumMap<>(Build.Role.class);
    private boolean concluded;
    private boolean closed;

    private record Named<T>(String name, T value) {
        @Override
        public String toString() {
            return name;
        }
    }

    /** A close step with a name, so a failing one is named in the shutdown log rather than shown as a lambda. */
    private record NamedClose(String name, AutoCloseable closer) implements AutoCloseable {
        @Override
        public void close() throws Exception {
            closer.close();
        }

        @Override
        public String toString() {
            return name;
        }
    }

    private Assembly() {}

    /**
     * Opens {@code parts} in dependency order; when one throws, closes what was opened (last first) and rethrows. The objects
     * {@code given} (the configuration, the metrics, the GPU backend opened before the banner) are there for every part.
     */
    public static Assembly open(List<? extends Part<?>> parts, Object... given) {
        Assembly assembly = new Assembly();
        assembly.objects.addAll(List.of(given));
        try {
            for (Part<?> part : order(parts)) {
                assembly.openPart(part);
            }
        } catch (RuntimeException | Error e) {
            assembly.close();
            throw e;
        }
        return assembly;
    }

    /** The parts in opening order: each after every part its edges name (a name not in the list is no edge), else list order. */
    public static List<Part<?>> order(List<? extends Part<?>> parts) {
        Set<String> names = new HashSet<>();
        for (Part<?> part : parts) {
            if (!names.add(part.name())) {
                throw new IllegalArgumentException("two parts named " + part.name());
            }
        }
        List<Part<?>> ordered = new ArrayList<>();
        Set<String> placed = new HashSet<>();
        List<Part<?>> left = new ArrayList<>(parts);
        while (!left.isEmpty()) {
            Part<?> next = left.stream().filter(p -> p.after().stream()
                    .allMatch(a -> placed.contains(a.part()) || !names.contains(a.part()))).findFirst()
                    .orElseThrow(() -> new IllegalArgumentException("the parts' after-edges form a circle among " + left.stream()
                            .map(Part::name).toList()));
            ordered.add(next);
            placed.add(next.name());
            left.remove(next);
        }
        return ordered;
    }

    private void openPart(Part<?> part) {
        Object object = part.open(new PartBuild(part.name()));
        if (object == null) {
            off.add(part.name());
            return;
        }
        opened.add(part.name());
        // a part may open what an earlier part made for it and offered (the warm-up's run, made by the request loop's part so
        // the loop tells it of the first request): one object, found once by type
        if (objects.stream().noneMatch(o -> o == object)) {
            objects.add(object);
        }
    }

    /** Freezes the wiring: from here on no part registers, offers or asks for anything. */
    public Assembly conclude() {
        concluded = true;
        return this;
    }

    /** Runs every registered start step in opening order (after {@link #conclude}). */
    public void start() {
        if (!concluded) {
            throw new IllegalStateException("start before conclude");
        }
        starts.forEach(start -> start.value().run());
        serves.forEach(serve -> serve.value().run());
    }

    /** The one opened object of {@code type} (after the assembly is open: the root's accessors); throws when there is none. */
    public <T> T get(Class<T> type) {
        return one(type, true);
    }

    /** Every part's {@code /status} block, by name, read now. */
    public Map<String, Object> status() {
        Map<String, Object> status = new LinkedHashMap<>();
        statuses.forEach((name, supplier) -> {
            Map<String, Object> block = supplier.get();
            if (block != null) {
                status.put(name, block);
            }
        });
        return status;
    }

    /** The parts that opened an object, in opening order. */
    public List<String> opened() {
        return List.copyOf(opened);
    }

    /** The parts that were switched off (opened nothing). */
    public List<String> off() {
        return List.copyOf(off);
    }

    /** The close steps' names, in the order {@link #close} runs them. */
    public List<String> closeOrder() {
        return closers.reversed().stream().map(Object::toString).toList();
    }

    /** Closes every close step, last registered first; idempotent. */
    @Override
    public synchronized void close() {
        if (closed) {
            return;
        }
        closed = true;
        concluded = true;
        CloseHelper.closeAll(closers.reversed());
    }

    private <T> T one(Class<T> type, boolean required) {
        List<T> found = all(type);
        if (found.size() > 1) {
            throw new IllegalStateException("several objects of " + type.getSimpleName() + " to choose from: " + found);
        }
        if (found.isEmpty() && required) {
            throw new IllegalStateException("no part opened a " + type.getSimpleName() + " (opened: " + opened + ", off: " + off + ")");
        }
        return found.isEmpty() ? null : found.getFirst();
    }

    private <T> List<T> all(Class<T> type) {
        return objects.stream().filter(type::isInstance).map(type::cast).toList();
    }

    /** The view of the assembly one part opens through; it throws once the assembly is concluded. */
    private final class PartBuild implements Build {
        private final String part;

        PartBuild(String part) {
            this.part = part;
        }

        private void open() {
            if (concluded) {
                throw new IllegalStateException(part + ": the assembly is concluded, no wiring after it");
            }
        }

        @Override
        public <T> T require(Class<T> type) {
            open();
            return one(type, true);
        }

        @Override
        public <T> T optional(Class<T> type) {
            open();
            return one(type, false);
        }

        @Override
        public <T> List<T> all(Class<T> type) {
            open();
            return Assembly.this.all(type);
        }

        @Override
        public <T> T offer(T object) {
            open();
            objects.add(Objects.requireNonNull(object, part));
            return object;
        }

        @Override
        public void agent(Role role, Agent agent) {
            open();
            if (agent != null) {
                agents.computeIfAbsent(role, r -> new ArrayList<>()).add(agent);
            }
        }

        @Override
        public List<Agent> agents(Role role) {
            open();
            return List.copyOf(agents.getOrDefault(role, List.of()));
        }

        @Override
        public void status(String name, Supplier<Map<String, Object>> supplier) {
            open();
            if (statuses.putIfAbsent(name, supplier) != null) {
                throw new IllegalStateException(part + ": a second /status block named " + name);
            }
        }

        @Override
        public <T extends AutoCloseable> T onClose(String name, T closer) {
            open();
            if (closer != null) {
                closers.add(new NamedClose(name, closer));
            }
            return closer;
        }

        @Override
        public void onStart(String name, Runnable start) {
            open();
            starts.add(new Named<>(name, start));
        }

        @Override
        public void onServe(String name, Runnable serve) {
            open();
            serves.add(new Named<>(name, serve));
        }

        @Override
        public Supplier<Map<String, Object>> statuses() {
            return Assembly.this::status;
        }
    }
}
