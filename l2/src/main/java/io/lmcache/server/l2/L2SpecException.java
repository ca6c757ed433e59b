package io.lmcache.server.l2;

/** An {@code --l2-adapter} value that breaks a rule; the message says which, in one line. */
public final class L2SpecException extends Exception {
    private static final long serialVersionUID = 1L;

    public L2SpecException(String message) {
        super(message);
    }
}
