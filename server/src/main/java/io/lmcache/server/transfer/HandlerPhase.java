package io.lmcache.server.transfer;

/**
 * A STORE or RETRIEVE handler's phases ({@code transfer_handler_cpu} in /status): planning (the instance's lease, on
 * CUDA the context warm-up's launch when there is one, the key's chunks and hashes, the block checks), reserving or
 * pinning the chunks' objects in L1, and the copy path's call (building the pieces and, on the GPU, submitting them).
 */
public enum HandlerPhase { PLAN, OBJECTS, COPY }
