package io.lmcache.server.transfer;

/** A worker's registered KV tensors, mapped into this process (shared memory, or CUDA IPC in the GPU path). */
public interface KvTensors extends AutoCloseable {
    /** Null when the mappings still reach the worker's memory, else why not (segment deleted, replaced, truncated). */
    String checkAlive();

    /** Unmaps; called once, after the last transfer using the tensors has finished. */
    @Override
    void close();
}
