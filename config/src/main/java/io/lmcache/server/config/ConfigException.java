package io.lmcache.server.config;

/** A configuration value that breaks a rule; the message names the flag and the rule. */
public final class ConfigException extends Exception {
    private static final long serialVersionUID = 1L;

    public ConfigException(String flag, String rule) {
        super(flag + ": " + rule);
    }
}
