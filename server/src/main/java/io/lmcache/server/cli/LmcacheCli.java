package io.lmcache.server.cli;

import com.fasterxml.jackson.databind.JsonNode;
import io.lmcache.server.Main;
import io.lmcache.server.config.ConfigLoader;
import io.lmcache.server.config.Versions;
import java.io.PrintWriter;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.Callable;
import picocli.AutoComplete;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;
import picocli.CommandLine.Parameters;

/**
 * {@code lmcache}: LMCache's command line as far as operators of this server need it.
 * {@code lmcache server ...} is {@code lmcache-server ...} (the same flags); {@code ping kvcache} and
 * {@code describe kvcache} read a running server's HTTP API as LMCache's commands do; {@code completion}
 * prints bash completion for {@code lmcache} and {@code lmcache-server}. Exit 1 when the server cannot
 * be read or is unhealthy, 2 for a usage error. {@code kvcache clear} and {@code quota set|get|list|delete} change or read
 * the server through its admin endpoints ({@link AdminTarget}: the token).
 */
@Command(name = "lmcache", mixinStandardHelpOptions = true, versionProvider = Versions.class, usageHelpAutoWidth = true,
        description = "LMCache's command line for lmcache-server: server, ping, describe, kvcache, quota, completion.",
        subcommands = {LmcacheCli.Ping.class, LmcacheCli.Describe.class, KvcacheCommand.class, QuotaCommand.class,
            LmcacheCli.Completion.class})
public final class LmcacheCli implements Runnable {
    static final String DEFAULT_URL = "http://localhost:8080";

    @CommandLine.Spec
    CommandLine.Model.CommandSpec spec;

    private LmcacheCli() {}

    public static void main(String[] args) throws InterruptedException {
        if (args.length > 0 && args[0].equals("server")) {
            // the server's own entry point, with its own parsing, exit codes and lifetime
            Main.main(Arrays.copyOfRange(args, 1, args.length));
            return;
        }
        System.exit(commandLine().execute(args));
    }

    /** The command tree, {@code server} included (for help and completion; running it goes to {@link Main}). */
    static CommandLine commandLine() {
        CommandLine cli = new CommandLine(new LmcacheCli());
        cli.addSubcommand("server", ConfigLoader.commandLine());
        return cli;
    }

    @Override
    public void run() {
        spec.commandLine().usage(spec.commandLine().getOut());
    }

    /** {@code --url} and {@code --format}, as LMCache's subcommands take them. */
    static final class Target {
        @Parameters(index = "0", description = "What to read: kvcache.", paramLabel = "TARGET")
        String target;

        @Option(names = "--url", defaultValue = DEFAULT_URL, description = "The server's HTTP address (default: ${DEFAULT-VALUE}).")
        String url;

        @Option(names = "--format", defaultValue = "terminal", description = "terminal or json (default: ${DEFAULT-VALUE}).")
        String format;

        void check(CommandLine.Model.CommandSpec spec) {
            if (!target.equals("kvcache")) {
                throw new CommandLine.ParameterException(spec.commandLine(), "TARGET must be kvcache (this server has no engine to ping), got '"
                        + target + "'");
            }
            if (!format.equals("terminal") && !format.equals("json")) {
                throw new CommandLine.ParameterException(spec.commandLine(), "--format must be terminal or json, got '" + format + "'");
            }
        }
    }

    /** {@code lmcache ping kvcache}: GET /healthcheck, its status and round trip. */
    @Command(name = "ping", mixinStandardHelpOptions = true, description = "Check that the server answers /healthcheck with 200.")
    static final class Ping implements Callable<Integer> {
        @CommandLine.Mixin
        Target target;

        @CommandLine.Spec
        CommandLine.Model.CommandSpec spec;

        @Override
        public Integer call() {
            target.check(spec);
            StatusClient client = new StatusClient(target.url);
            String error = null;
            long roundTripNs = 0;
            try {
                StatusClient.Answer answer = client.get("/healthcheck");
                roundTripNs = answer.roundTripNs();
                if (answer.status() != 200) {
                    error = "HTTP " + answer.status() + ": " + answer.body().strip();
                }
            } catch (StatusClient.Failure e) {
                error = e.getMessage();
            }
            Report report = new Report("Ping KV Cache", 30).add("status", "Status", error == null ? "OK" : "FAIL")
                    .add("round_trip_time_ms", "Round trip time (ms)", roundTripNs / 1e6);
            spec.commandLine().getOut().print(report.render(target.format));
            spec.commandLine().getOut().flush();
            if (error != null) {
                spec.commandLine().getErr().println(error);
                return 1;
            }
            return 0;
        }
    }

    /** {@code lmcache describe kvcache}: the /status fields LMCache's describe shows. */
    @Command(name = "describe", mixinStandardHelpOptions = true, description = "Show the server's status: health, L1, eviction, models.")
    static final class Describe implements Callable<Integer> {
        @CommandLine.Mixin
        Target target;

        @CommandLine.Spec
        CommandLine.Model.CommandSpec spec;

        @Override
        public Integer call() {
            target.check(spec);
            StatusClient client = new StatusClient(target.url);
            JsonNode status;
            try {
                status = client.json("/status");
            } catch (StatusClient.Failure e) {
                spec.commandLine().getErr().println(e.getMessage());
                return 1;
            }
            spec.commandLine().getOut().print(describe(status, client.baseUrl()).render(target.format));
            spec.commandLine().getOut().flush();
            return 0;
        }

        static Report describe(JsonNode status, String url) {
            JsonNode manager = status.path("storage_manager").path("l1_manager");
            Report report = new Report("LMCache KV Cache Service", 50)
                    .add("health", "Health", status.has("is_healthy") ? (status.get("is_healthy").asBoolean() ? "OK" : "UNHEALTHY") : null)
                    .add("url", "URL", url)
                    .add("engine_type", "Engine type", text(status.path("engine_type")))
                    .add("chunk_size", "Chunk size", number(status.path("chunk_size")));
            JsonNode total = manager.path("memory_total_bytes");
            report.add("l1_capacity_gb", "L1 capacity (GB)", total.isNumber() ? Math.round(total.asDouble() / (1L << 30) * 100) / 100.0 : null);
            JsonNode used = manager.path("memory_used_bytes");
            JsonNode ratio = manager.path("memory_usage_ratio");
            report.add("l1_used_gb", "L1 used (GB)", used.isNumber() && ratio.isNumber() ? String.format(Locale.ROOT,
                    "%.2f (%.1f%%)", used.asDouble() / (1L << 30), ratio.asDouble() * 100) : null);
            report.add("eviction_policy", "Eviction policy", text(status.path("storage_manager").path("eviction_controller").path("eviction_policy")))
                    .add("cached_objects", "Cached objects", number(manager.path("total_object_count")))
                    .add("active_sessions", "Active sessions", number(status.path("active_sessions")));
            models(status.path("cache_context_meta"), report);
            return report;
        }

        /** One section per (model, world size), as LMCache groups the GPU ids of one model. */
        private static void models(JsonNode meta, Report report) {
            Map<String, List<String>> gpuIds = new LinkedHashMap<>();
            Map<String, JsonNode> first = new LinkedHashMap<>();
            for (Iterator<Map.Entry<String, JsonNode>> it = meta.fields(); it.hasNext();) {
                Map.Entry<String, JsonNode> entry = it.next();
                String key = entry.getValue().path("model_name").asText() + "\0" + entry.getValue().path("world_size").asText();
                gpuIds.computeIfAbsent(key, k -> new ArrayList<>()).add(entry.getKey());
                first.putIfAbsent(key, entry.getValue());
            }
            int index = 0;
            for (Map.Entry<String, List<String>> model : gpuIds.entrySet()) {
                JsonNode info = first.get(model.getKey());
                report.section("model_" + index++, "Model: " + info.path("model_name").asText())
                        .add("model", "Model", info.path("model_name").asText())
                        .add("world_size", "World size", number(info.path("world_size")))
                        .add("gpu_ids", "GPU IDs", String.join(", ", model.getValue()));
                JsonNode layout = info.path("kv_cache_layout");
                for (String[] field : new String[][] {{"num_layers", "Num layers"}, {"num_blocks", "Num blocks"},
                    {"cache_size_per_token", "Cache size per token (bytes)"}}) {
                    if (layout.has(field[0])) {
                        report.add(field[0], field[1], number(layout.get(field[0])));
                    }
                }
            }
        }

        private static Object text(JsonNode node) {
            return node.isMissingNode() || node.isNull() ? null : node.asText();
        }

        private static Object number(JsonNode node) {
            return node.isMissingNode() || node.isNull() ? null : node.isIntegralNumber() ? node.asLong() : node.isNumber() ? node.asDouble()
                    : node.asText();
        }
    }

    /** {@code lmcache completion}: bash completion for lmcache and lmcache-server (source it, or drop it in bash_completion.d). */
    @Command(name = "completion", mixinStandardHelpOptions = true,
            description = "Print bash completion for lmcache and lmcache-server: source <(lmcache completion)")
    static final class Completion implements Callable<Integer> {
        @CommandLine.Spec
        CommandLine.Model.CommandSpec spec;

        @Override
        public Integer call() {
            PrintWriter out = spec.commandLine().getOut();
            out.print(AutoComplete.bash("lmcache", commandLine()));
            out.print(AutoComplete.bash("lmcache-server", ConfigLoader.commandLine()));
            out.flush();
            return 0;
        }
    }
}
