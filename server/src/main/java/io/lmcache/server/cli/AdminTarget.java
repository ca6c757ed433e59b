package io.lmcache.server.cli;

import io.lmcache.server.config.ConfigLoader;
import picocli.CommandLine;
import picocli.CommandLine.Option;

/**
 * {@code --url}, {@code --format} and the admin token of the commands that change a server or read its tenants. LMCache's
 * commands send no token (its HTTP API has none); this server's admin endpoints need one when the server was given one, so
 * {@code --token} or the server's own variable {@code LMCACHE_HTTP_ADMIN_TOKEN} supplies it (without either: loopback only).
 */
final class AdminTarget {
    @Option(names = "--url", defaultValue = LmcacheCli.DEFAULT_URL, description = "The server's HTTP address (default: ${DEFAULT-VALUE}).")
    String url;

    @Option(names = "--format", defaultValue = "terminal", description = "terminal or json (default: ${DEFAULT-VALUE}).")
    String format;

    @Option(names = "--token", paramLabel = "<token>",
            description = "The server's admin token (default: $" + ConfigLoader.ENV_ADMIN_TOKEN + "; none: the server must be on this host"
                    + " and have no token).")
    String token;

    void check(CommandLine.Model.CommandSpec spec) {
        if (!format.equals("terminal") && !format.equals("json")) {
            throw new CommandLine.ParameterException(spec.commandLine(), "--format must be terminal or json, got '" + format + "'");
        }
    }

    /** The token given, else the environment's; empty when neither. */
    String token() {
        if (token != null) {
            return token;
        }
        String env = System.getenv(ConfigLoader.ENV_ADMIN_TOKEN);
        return env == null ? "" : env;
    }
}
