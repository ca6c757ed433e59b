package io.lmcache.server.cli;

import com.fasterxml.jackson.databind.JsonNode;
import java.util.Iterator;
import java.util.Map;
import java.util.concurrent.Callable;
import picocli.CommandLine;
import picocli.CommandLine.Command;

/**
 * {@code lmcache kvcache clear --url URL}: LMCache's {@code kvcache} command (LMCache/LMCache
 * {@code lmcache/cli/commands/kvcache.py} @c957376f, which posts {@code /api/clear-cache}); here it posts this server's
 * {@code /cache/clear} (the same clear of L1, through the admin guard) and prints LMCache's "KV Cache Clear" report with what
 * was removed.
 */
@Command(name = "kvcache", mixinStandardHelpOptions = true, description = "Manage KV cache state: clear.",
        subcommands = KvcacheCommand.Clear.class)
final class KvcacheCommand implements Runnable {
    @CommandLine.Spec
    CommandLine.Model.CommandSpec spec;

    @Override
    public void run() {
        throw new CommandLine.ParameterException(spec.commandLine(), "No sub-command specified: lmcache kvcache clear --url URL");
    }

    /** {@code lmcache kvcache clear}: POST /cache/clear. */
    @Command(name = "clear", mixinStandardHelpOptions = true, description = "Clear all cached KV data in L1.")
    static final class Clear implements Callable<Integer> {
        @CommandLine.Mixin
        AdminTarget target;

        @CommandLine.Spec
        CommandLine.Model.CommandSpec spec;

        @Override
        public Integer call() {
            target.check(spec);
            JsonNode answer;
            try {
                answer = new StatusClient(target.url).sendJson("POST", "/cache/clear", "{}", target.token());
            } catch (StatusClient.Failure e) {
                spec.commandLine().getErr().println(e.getMessage());
                return 1;
            }
            Report report = new Report("KV Cache Clear", 40).add("status", "Status", "OK");
            for (Iterator<Map.Entry<String, JsonNode>> it = answer.path("cleared").fields(); it.hasNext();) {
                Map.Entry<String, JsonNode> entry = it.next();
                if (entry.getValue().isNumber()) {
                    report.add("cleared_" + entry.getKey(), "Cleared " + entry.getKey(), entry.getValue().asLong());
                }
            }
            spec.commandLine().getOut().print(report.render(target.format));
            spec.commandLine().getOut().flush();
            return 0;
        }
    }
}
