package io.lmcache.server.transfer;

/** A registration whose tensors this server cannot serve; the message says what and why. */
public final class LayoutException extends Exception {
    private static final long serialVersionUID = 1L;

    public LayoutException(String message) {
        super(message);
    }
}
