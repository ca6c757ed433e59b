package io.lmcache.server.protocol;

import java.util.List;

/**
 * The value a handler answers with. {@link None} travels as no payload frame at all (the client's
 * typed decoder rejects anything else for None-typed operations); every other value is one msgpack
 * frame, encoded by {@link ReplyEncoder}.
 */
public sealed interface Reply {

    None NONE = new None();
    Bool TRUE = new Bool(true);
    Bool FALSE = new Bool(false);

    record None() implements Reply {}

    record Bool(boolean value) implements Reply {}

    record Int(long value) implements Reply {}

    record Str(String value) implements Reply {}

    record StrList(List<String> values) implements Reply {}

    /** STORE/RETRIEVE: exactly {@code [bin(64-byte event handle), bool]}. */
    record Transfer(byte[] eventHandle, boolean ok) implements Reply {}

    /**
     * REGISTER_LAYERWISE_IPC_EVENT_POOL: {@code (layerwise_batch, handles)}, LMCache's {@code tuple[int, list[bytes]]}
     * ({@code protocols/layerwise.py@3ed3c8ba}); {@code (0, [])} is its answer when layer-wise mode is off.
     */
    record LayerwisePool(int layerwiseBatch, List<byte[]> handles) implements Reply {}

    /** One RETRIEVE_LAYERWISE reply frame: {@code (payload, is_final, succeeded)}, LMCache's {@code tuple[bytes, bool, bool]}. */
    record LayerwiseFrame(byte[] payload, boolean isFinal, boolean succeeded) implements Reply {}

    /** REGISTER_…_ENGINE_DRIVEN_CONTEXT: where the worker finds the pool. */
    record EnginePool(String shmName, long poolSize) implements Reply {}

    /** One chunk object's place in the pool, as the engine-driven client reads it. */
    record Slot(long offset, long length, int[] shape, String dtype) {}

    /** PREPARE_STORE: {@code {context: {slots, chunk_indices}}}; both empty = every chunk is already stored. */
    record PrepareStore(List<Slot> slots, int[] chunkIndices) implements Reply {}

    /** PREPARE_RETRIEVE: {@code {success, data: b"", context: {slots}}}, or a miss with an empty context. */
    record PrepareRetrieve(boolean success, List<Slot> slots) implements Reply {}

    /**
     * One record of the KV-event log as LMCache's {@code KVEventRecord} (kv-events.md §3): medium {@code "CPU"} or
     * {@code "STORAGE"}; {@code parentBlockHash} null = nil.
     */
    record KvEventRecord(long seq, KvEventKind kind, String medium, String modelName, List<byte[]> blockHashes, byte[] parentBlockHash,
            int[] tokenIds, int blockSize) {}

    /** {@code KVEventPollResult} (poll) and {@code KVEventBatch} (one stream message): the same five fields. */
    record KvEvents(boolean enabled, long incarnation, long nextCursor, boolean lost, List<KvEventRecord> events) implements Reply {}
}
