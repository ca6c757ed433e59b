package io.lmcache.server.config;

import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.function.Function;
import java.util.stream.Collectors;
import picocli.CommandLine;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Model.OptionSpec;
import picocli.CommandLine.ParseResult;

/**
 * LMCache's {@code lmcache server} flags that have no counterpart here, so that every command line
 * and config file written for LMCache is accepted or refused by rule, never by "unknown option":
 * <ul>
 *   <li>{@link Rule.NoEffect}: the flag changes nothing that matters here (an allocator tuning knob, an
 *       observability switch, a timeout of a feature that is off); accepted with one warning at start;</li>
 *   <li>{@link Rule.Unsupported}: without the feature the server would behave differently from what the
 *       operator asked for (GDS, DAX, P2P, coordinator, CacheBlend, L2); any value other than LMCache's
 *       "off" refuses the start with "not supported by lmcache-server" (exit 2).</li>
 * </ul>
 * A flag this server declares itself (another branch may add L2 or hybrid flags) is never added
 * here: the real option wins.
 *
 * <p>The list follows LMCache's {@code lmcache server} parser ({@code lmcache/cli/commands/server.py}: the argument
 * groups of {@code lmcache/v1/multiprocess/config.py}, {@code lmcache/v1/distributed/config.py} and
 * {@code lmcache/v1/mp_observability/config.py}) and its flag reference {@code docs/source/mp/configuration.rst};
 * LmcacheFlagsTest holds the whole list with the revisions it was taken from.
 */
final class LmcacheFlags {
    /** What follows the flag on LMCache's command line. */
    enum Kind {
        /** {@code store_true}: no value. */
        FLAG,
        /** One value. */
        VALUE,
        /** {@code nargs="*"}: any number of values. */
        LIST
    }

    /** What the flag does here. */
    sealed interface Rule {
        /** Accepted; one warning says why it changes nothing. */
        record NoEffect(String why) implements Rule {}

        /** Refused unless its value is one of {@code offValues} (LMCache's defaults, which leave the feature off). */
        record Unsupported(String feature, Set<String> offValues) implements Rule {}
    }

    /** One LMCache flag. */
    record Flag(String name, Kind kind, Rule rule) {
        /** The config file's key ({@code l1_init_size_gb}). */
        String key() {
            return name.substring(2).replace('-', '_');
        }
    }

    private static final Set<String> EMPTY = Set.of("");
    /** Marks the options added here (a real option of the same name is never marked). */
    private static final String COMPAT = "lmcache.compat";

    static final List<Flag> TABLE = List.of(
            // --- MP server
            unsupported("--engine-type", Kind.VALUE, "CacheBlend (--engine-type blend, blend_legacy)", "default"),
            unsupported("--runtime-plugin-locations", Kind.LIST, "runtime plugins"),
            noEffect("--runtime-plugin-config", Kind.VALUE, "no runtime plugins run here"),
            noEffect("--script-allowed-imports", Kind.LIST, "there is no /run_script endpoint"),
            noEffect("--enable-segmented-prefix", Kind.FLAG, "it applies to CacheBlend only"),
            unsupported("--enable", Kind.LIST, "experimental transfer modules (--enable)"),
            unsupported("--transport", Kind.VALUE, "the gRPC request transport (--transport grpc)", "zmq"),
            noEffect("--grpc-server-workers", Kind.VALUE, "there is no gRPC transport"),
            // block 0 is vLLM's null block here; an engine whose block 0 holds data (ATOM) would lose it
            unsupported("--null-block-id", Kind.VALUE, "a null block other than vLLM's block 0 (--null-block-id)", "0"),
            noEffect("--run-script-api-enabled", Kind.FLAG, "there is no /run_script endpoint"),
            noEffect("--enable-dedup-content", Kind.FLAG, "it applies to CacheBlend only"),
            // --- P2P and coordinator
            unsupported("--p2p-advertise-url", Kind.VALUE, "P2P KV sharing", ""),
            unsupported("--p2p-listen-url", Kind.VALUE, "P2P KV sharing", ""),
            noEffect("--p2p-lookup-timeout", Kind.VALUE, "P2P is off"),
            noEffect("--p2p-load-timeout", Kind.VALUE, "P2P is off"),
            noEffect("--p2p-transfer-engine", Kind.VALUE, "P2P is off"),
            noEffect("--p2p-rdma-device", Kind.VALUE, "P2P is off"),
            noEffect("--p2p-rdma-port", Kind.VALUE, "P2P is off"),
            noEffect("--p2p-rdma-gid-index", Kind.VALUE, "P2P is off"),
            noEffect("--p2p-rdma-gid-indices", Kind.VALUE, "P2P is off"),
            noEffect("--p2p-rdma-queue-depth", Kind.VALUE, "P2P is off"),
            noEffect("--p2p-rdma-handshake-timeout-ms", Kind.VALUE, "P2P is off"),
            // the coordinator flags are the server's own (ServerOptions, FleetSettings: issue 49)
            // --- L1 memory
            noEffect("--l1-use-lazy", Kind.FLAG, "the pool is always prepared region by region in the background, usable as it goes"),
            noEffect("--no-l1-use-lazy", Kind.FLAG, "the pool is always prepared region by region in the background, usable as it goes"),
            noEffect("--l1-init-size-gb", Kind.VALUE, "the pool is usable from its first prepared region"),
            noEffect("--l1-align-bytes", Kind.VALUE, "objects live in size classes of 2 MiB pages"),
            noEffect("--l1-use-hugepages", Kind.FLAG, "the pool asks for transparent huge pages itself where the kernel allows them"
                    + " (/status shows whether it got them)"),
            noEffect("--no-l1-use-hugepages", Kind.FLAG, "the pool asks for transparent huge pages itself where the kernel allows them"
                    + " (/status shows whether it got them)"),
            unsupported("--l1-devdax-path", Kind.VALUE, "Device-DAX as L1 memory", ""),
            unsupported("--gds-l1-path", Kind.VALUE, "GPUDirect Storage as L1 memory", ""),
            noEffect("--gds-l1-backend", Kind.VALUE, "GPUDirect Storage is off"),
            noEffect("--gds-l1-use-direct-io", Kind.FLAG, "GPUDirect Storage is off"),
            noEffect("--no-gds-l1-use-direct-io", Kind.FLAG, "GPUDirect Storage is off"),
            unsupported("--l1-manager", Kind.VALUE, "custom L1 managers (--l1-manager)", ""),
            noEffect("--eviction-target-watermark", Kind.VALUE, "a background eviction frees --eviction-ratio of the pool"),
            // --- L2
            noEffect("--periodic-notifier-interval-ms", Kind.VALUE, "there is no L2 tier"),
            // --- observability
            noEffect("--disable-observability", Kind.FLAG, "metrics and logs stay on (LMCACHE_LOG_LEVEL sets how much is logged)"),
            noEffect("--disable-metrics", Kind.FLAG, "/metrics stays on; it costs nothing when nobody scrapes it"),
            noEffect("--disable-logging", Kind.FLAG, "logging stays on (LMCACHE_LOG_LEVEL=ERROR quiets it)"),
            noEffect("--disable-grpc-metrics", Kind.FLAG, "there is no gRPC transport"),
            noEffect("--enable-tracing", Kind.FLAG, "there is no OpenTelemetry tracing"),
            noEffect("--otlp-endpoint", Kind.VALUE, "metrics are not pushed; Prometheus scrapes /metrics"),
            noEffect("--event-bus-queue-size", Kind.VALUE, "metrics are counted in place, there is no event bus"),
            // --trace-level, --trace-output and --lookup-hash-log-* are the server's own (ServerOptions, DiagnosticsSettings: issue 49)
            noEffect("--enable-extra-logging", Kind.FLAG, "the activity log line every 10 s already reports L1 use and transfers"),
            noEffect("--extra-logging-interval", Kind.VALUE, "the activity log runs every 10 s"),
            noEffect("--enable-gc-monitor", Kind.FLAG, "it times CPython's garbage collector; this server runs on the JVM"),
            noEffect("--gc-monitor-min-pause-ms", Kind.VALUE, "it times CPython's garbage collector; this server runs on the JVM"),
            noEffect("--gc-monitor-top-objects", Kind.VALUE, "it times CPython's garbage collector; this server runs on the JVM"));

    private static final Map<String, Flag> BY_KEY = TABLE.stream().collect(Collectors.toMap(Flag::key, Function.identity()));

    private LmcacheFlags() {}

    private static Flag noEffect(String name, Kind kind, String why) {
        return new Flag(name, kind, new Rule.NoEffect(why));
    }

    private static Flag unsupported(String name, Kind kind, String feature, String... offValues) {
        Set<String> off = kind == Kind.VALUE && offValues.length == 0 ? EMPTY : Set.of(offValues);
        return new Flag(name, kind, new Rule.Unsupported(feature, off));
    }

    /** The table's flags this server does not declare itself (all of them unless a branch added the feature). */
    static List<Flag> active() {
        CommandSpec spec = new CommandLine(new ServerOptions()).getCommandSpec();
        return TABLE.stream().filter(flag -> spec.findOption(flag.name()) == null).toList();
    }

    /** Adds every table flag the command line does not declare itself, hidden from {@code --help} (docs/configuration.md lists them). */
    static void register(CommandSpec spec) {
        for (Flag flag : TABLE) {
            if (spec.findOption(flag.name()) != null) {
                continue;
            }
            OptionSpec.Builder option = OptionSpec.builder(flag.name()).hidden(true).descriptionKey(COMPAT)
                    .description("LMCache compatibility: " + describe(flag));
            switch (flag.kind()) {
                case FLAG -> option.arity("0").type(boolean.class);
                case VALUE -> option.arity("1").type(String.class);
                case LIST -> option.arity("0..*").type(List.class).auxiliaryTypes(String.class);
            }
            spec.addOption(option.build());
        }
    }

    /** The words docs/configuration.md uses for a flag's rule. */
    static String describe(Flag flag) {
        return switch (flag.rule()) {
            case Rule.NoEffect(String why) -> "accepted, no effect (" + why + ")";
            case Rule.Unsupported(String feature, Set<String> off) -> "refused: " + feature + " is not supported by lmcache-server";
        };
    }

    /**
     * Applies the rules to the table flags given on the command line: warnings, or the first refusal. The accepted ones
     * without effect also go to {@code withoutEffect} (their names; {@code /config} lists them).
     */
    static void check(ParseResult parsed, List<String> warnings, List<String> withoutEffect) throws ConfigException {
        for (Flag flag : TABLE) {
            OptionSpec option = parsed.matchedOption(flag.name());
            // a flag declared for real elsewhere is matched under its own spec, not ours
            if (option != null && COMPAT.equals(option.descriptionKey())) {
                apply(flag, flag.name(), option.getValue(), warnings, withoutEffect);
            }
        }
    }

    /** A config file's key: true when it is a table flag (its rule applied), false when not. */
    static boolean fromFile(String key, Object value, String file, List<String> warnings, List<String> withoutEffect)
            throws ConfigException {
        Flag flag = BY_KEY.get(key);
        if (flag == null) {
            return false;
        }
        Object normalized = value;
        if (flag.kind() == Kind.FLAG && !(value instanceof Boolean)) {
            normalized = Boolean.parseBoolean(String.valueOf(value));
        } else if (flag.kind() == Kind.VALUE && !(value instanceof String)) {
            normalized = String.valueOf(value);
        }
        apply(flag, "config file " + file + ": " + key, normalized, warnings, withoutEffect);
        return true;
    }

    private static void apply(Flag flag, String where, Object value, List<String> warnings, List<String> withoutEffect)
            throws ConfigException {
        boolean given = switch (flag.kind()) {
            case FLAG -> Boolean.TRUE.equals(value);
            case VALUE -> value != null;
            case LIST -> value instanceof List<?> list && !list.isEmpty();
        };
        if (!given) {
            return;
        }
        switch (flag.rule()) {
            case Rule.NoEffect(String why) -> {
                warnings.add(where + " is accepted for compatibility with LMCache and has no effect here: " + why);
                if (!withoutEffect.contains(flag.name())) {
                    withoutEffect.add(flag.name());
                }
            }
            case Rule.Unsupported(String feature, Set<String> off) -> {
                if (flag.kind() == Kind.VALUE && off.contains(String.valueOf(value).strip().toLowerCase(Locale.ROOT))) {
                    return;
                }
                throw new ConfigException(where.startsWith("--") ? where : "--config-file", (where.startsWith("--") ? "" : where + ": ")
                        + feature + " is not supported by lmcache-server (got " + shown(value) + ")");
            }
        }
    }

    private static String shown(Object value) {
        String text = value instanceof Boolean ? "the flag" : String.valueOf(value);
        return text.length() > 80 ? text.substring(0, 80) + "..." : text;
    }
}
