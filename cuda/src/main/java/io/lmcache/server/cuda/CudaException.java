package io.lmcache.server.cuda;

/** A CUDA driver call that failed, or a CUDA operation this server refuses; the message names both. */
public final class CudaException extends RuntimeException {
    private static final long serialVersionUID = 1L;

    public CudaException(String message) {
        super(message);
    }
}
