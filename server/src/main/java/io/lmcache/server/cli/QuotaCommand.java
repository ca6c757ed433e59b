package io.lmcache.server.cli;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.util.concurrent.Callable;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;
import picocli.CommandLine.Parameters;

/**
 * {@code lmcache quota set|get|list|delete}: LMCache's per-salt quota commands (LMCache/LMCache
 * {@code lmcache/cli/commands/quota/}: {@code __init__.py} @c7f232a1, {@code set_command.py}, {@code get_command.py},
 * {@code list_command.py} @3de94058, {@code delete_command.py} @07a2ea7a), with their arguments, report titles and fields.
 * LMCache's commands call {@code PUT|GET|DELETE /quota/{salt}} and {@code GET /quota}; here they read and set this server's
 * {@code /quota} ({@code GET}: every tenant's quota and usage; {@code POST {"tenant", "quota_bytes"}}, -1 removing one), so
 * they work against a server with or without LMCache's route shapes. A salt is a tenant's secret: the token goes with every
 * call. The empty salt is {@code _default}, as in LMCache.
 */
@Command(name = "quota", mixinStandardHelpOptions = true, description = "Manage per-salt cache quotas (--eviction-policy IsolatedLRU).",
        subcommands = {QuotaCommand.Set.class, QuotaCommand.Get.class, QuotaCommand.ListQuotas.class, QuotaCommand.Delete.class})
final class QuotaCommand implements Runnable {
    /** LMCache's name for the empty (un-salted) cache salt, in URLs and here. */
    static final String DEFAULT_SALT = "_default";
    private static final ObjectMapper JSON = new ObjectMapper();
    private static final double GIB = 1L << 30;

    @CommandLine.Spec
    CommandLine.Model.CommandSpec spec;

    @Override
    public void run() {
        throw new CommandLine.ParameterException(spec.commandLine(), "No sub-command specified: lmcache quota {set,get,list,delete}");
    }

    static String escape(String salt) {
        return salt.isEmpty() ? DEFAULT_SALT : salt;
    }

    /** The tenant's line of GET /quota, or a missing node. */
    static JsonNode line(JsonNode quotas, String tenant) {
        for (JsonNode line : quotas.path("tenants")) {
            if (line.path("tenant").asText().equals(tenant)) {
                return line;
            }
        }
        return JSON.missingNode();
    }

    static Double gib(JsonNode bytes) {
        return bytes.isNumber() ? Math.round(bytes.asDouble() / GIB * 1e6) / 1e6 : null;
    }

    /** Runs one quota command: prints its report, or the failure on stderr with exit 1. */
    abstract static class QuotaCall implements Callable<Integer> {
        @CommandLine.Mixin
        AdminTarget target;

        @CommandLine.Spec
        CommandLine.Model.CommandSpec spec;

        abstract Report report(StatusClient client, String token) throws StatusClient.Failure;

        @Override
        public Integer call() {
            target.check(spec);
            Report report;
            try {
                report = report(new StatusClient(target.url), target.token());
            } catch (StatusClient.Failure e) {
                spec.commandLine().getErr().println(e.getMessage());
                return 1;
            }
            spec.commandLine().getOut().print(report.render(target.format));
            spec.commandLine().getOut().flush();
            return 0;
        }

        static JsonNode quotas(StatusClient client, String token) throws StatusClient.Failure {
            return client.sendJson("GET", "/quota", null, token);
        }

        static JsonNode post(StatusClient client, String token, String tenant, long quotaBytes) throws StatusClient.Failure {
            String body = JSON.createObjectNode().put("tenant", tenant).put("quota_bytes", quotaBytes).toString();
            return client.sendJson("POST", "/quota", body, token);
        }
    }

    /** {@code lmcache quota set SALT --limit-gb GB}. */
    @Command(name = "set", mixinStandardHelpOptions = true, description = "Create or update a quota for a cache_salt.")
    static final class Set extends QuotaCall {
        @Parameters(index = "0", paramLabel = "SALT", description = "The cache_salt; _default for un-salted traffic.")
        String salt;

        @Option(names = "--limit-gb", required = true, paramLabel = "GB", description = "Quota limit in gigabytes (GiB, non-negative).")
        double limitGb;

        @Override
        Report report(StatusClient client, String token) throws StatusClient.Failure {
            if (!Double.isFinite(limitGb) || limitGb < 0 || limitGb * GIB > Long.MAX_VALUE) {
                throw new CommandLine.ParameterException(spec.commandLine(), "--limit-gb must be a finite number >= 0, got " + limitGb);
            }
            String tenant = escape(salt);
            post(client, token, tenant, Math.round(limitGb * GIB));
            JsonNode line = line(quotas(client, token), tenant);
            return new Report("Quota Set", 40).add("cache_salt", "Cache salt", tenant)
                    .add("limit_gb", "Limit (GB)", line.isMissingNode() ? limitGb : gib(line.path("quota_bytes")))
                    .add("status", "Status", "ok");
        }
    }

    /** {@code lmcache quota get SALT}. */
    @Command(name = "get", mixinStandardHelpOptions = true, description = "Show the quota and current usage for a cache_salt.")
    static final class Get extends QuotaCall {
        @Parameters(index = "0", paramLabel = "SALT", description = "The cache_salt; _default for un-salted traffic.")
        String salt;

        @Override
        Report report(StatusClient client, String token) throws StatusClient.Failure {
            String tenant = escape(salt);
            JsonNode line = line(quotas(client, token), tenant);
            Double usage = gib(line.path("used_bytes"));
            return new Report("Quota Info", 40).add("cache_salt", "Cache salt", tenant)
                    .add("limit_gb", "Limit (GB)", gib(line.path("quota_bytes")))
                    .add("current_usage_gb", "Current usage (GB)", usage == null ? 0.0 : usage)
                    .add("exists", "Exists", line.path("quota_bytes").isNumber());
        }
    }

    /** {@code lmcache quota list}: the salts with a quota. */
    @Command(name = "list", mixinStandardHelpOptions = true, description = "List all registered quotas and their usage.")
    static final class ListQuotas extends QuotaCall {
        @Override
        Report report(StatusClient client, String token) throws StatusClient.Failure {
            Report report = new Report("Quota List", 55);
            int index = 0;
            for (JsonNode line : quotas(client, token).path("tenants")) {
                if (!line.path("quota_bytes").isNumber()) {
                    continue;
                }
                String tenant = line.path("tenant").asText();
                report.section("quota_" + index++, "Salt: " + tenant).add("cache_salt", "Cache salt", tenant)
                        .add("limit_gb", "Limit (GB)", gib(line.path("quota_bytes")))
                        .add("current_usage_gb", "Current usage (GB)", gib(line.path("used_bytes")));
            }
            if (index == 0) {
                report.add("info", "Info", "No quotas configured");
            }
            return report;
        }
    }

    /** {@code lmcache quota delete SALT}: status {@code removed}, or {@code not_found} when the salt had no quota. */
    @Command(name = "delete", mixinStandardHelpOptions = true, description = "Remove a quota for a cache_salt.")
    static final class Delete extends QuotaCall {
        @Parameters(index = "0", paramLabel = "SALT", description = "The cache_salt; _default for un-salted traffic.")
        String salt;

        @Override
        Report report(StatusClient client, String token) throws StatusClient.Failure {
            String tenant = escape(salt);
            boolean existed = line(quotas(client, token), tenant).path("quota_bytes").isNumber();
            if (existed) {
                post(client, token, tenant, -1);
            }
            return new Report("Quota Delete", 40).add("cache_salt", "Cache salt", tenant).add("status", "Status",
                    existed ? "removed" : "not_found");
        }
    }
}
