package io.lmcache.server.config;

/**
 * A start-up refused because of what the server found on the host (a name in /dev/shm that is
 * taken, ...), not a crash: {@code Main} prints the message as the one line of a bad flag value
 * ({@link ConfigLoader#errorLine}) and exits with {@link ConfigLoader#EXIT_USAGE}, without a stack trace.
 */
public final class StartupException extends RuntimeException {
    private static final long serialVersionUID = 1L;

    public StartupException(String flag, String rule) {
        super(flag + ": " + rule);
    }
}
