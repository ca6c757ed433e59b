package io.lmcache.server.transfer;

/**
 * A STORE or RETRIEVE handler's phases ({@code transfer_handler_cpu} in /status): planning (the instance's lease, on
 * CUDA the context warm-up's launch when there is one, the key's chunks and hashes, the block checks), reserving or
 * pinning the chunks' objects in L1, and the copy path's call (building the pieces and, on the GPU, submitting them).
 * A STORE hashes and reserves each chunk inside its copy call, as that chunk's pieces go out (the first chunks' copies
 * overlap the rest's hashing): its PLAN holds no hashing but what the memo gave, its COPY the hashing and reservations, and
 * its OBJECTS what follows the call (the rest of the chain after a chunk without room, the window commit's note). A per-chunk
 * RETRIEVE pins each chunk's objects inside its copy call in the same way ({@link GroupPieces#emitPinning}): its OBJECTS is
 * empty and its COPY holds the pins; while a write is in flight, and in layer-wise mode, its OBJECTS holds them all, pinned
 * first.
 */
public enum HandlerPhase { PLAN, OBJECTS, COPY }
