package io.lmcache.server.protocol;

/**
 * LMCache's {@code IPCCacheServerKey}: the full token list of a request plus the token range
 * {@code [start, end)} an operation covers. Identity for storage comes from model, world size,
 * worker (kv rank), the tokens, the cache salt and the request's tags ({@code lmcache.tag.*} entries of
 * {@code request_configs}, {@link RequestTags}); {@code requestId}, {@code numKvReaders} and the other
 * {@code request_configs} entries (of which only the load controls are kept: {@link RequestConfigs}) are not part of it.
 *
 * @param workerId the kv rank, or {@link #NO_WORKER} (msgpack nil) for a scheduler LOOKUP
 * @param tokenIds read-only: the decoder hands every request of the same token ids one array ({@link IntArrayMemo}), and the
 *     chunk-hash memo keeps it by reference; nothing writes it
 * @param numKvReaders how many workers will RETRIEVE each object; 0 = an older client without the field
 */
public record CacheKey(
        String modelName,
        int worldSize,
        int workerId,
        int[] tokenIds,
        int start,
        int end,
        String requestId,
        String cacheSalt,
        int numKvReaders,
        RequestConfigs requestConfigs) {

    public static final int NO_WORKER = -1;

    /** The request's identity tags, sorted ({@link RequestTags#NONE} without): part of every key of the request. */
    public RequestTags tags() {
        return requestConfigs.tags();
    }

    /**
     * The read locks a LOOKUP takes per hit object: {@code num_kv_readers}, with 0 (absent: an older vLLM client, SGLang's
     * connector) read as 1, as LMCache does (its newest server refuses 0 at LOOKUP, {@code require_num_kv_readers} in
     * {@code custom_types.py}, index id 69707146292): without a lock a hit could be evicted before its RETRIEVE.
     */
    public int readLocks() {
        return Math.max(1, numKvReaders);
    }

    public boolean hasWorker() {
        return workerId != NO_WORKER;
    }

    @Override
    public String toString() {
        return "CacheKey[model=" + modelName + ", world_size=" + worldSize + ", worker_id="
                + (hasWorker() ? Integer.toString(workerId) : "None") + ", tokens=" + tokenIds.length + ", range=["
                + start + ", " + end + "), request_id=" + requestId + ", cache_salt='" + cacheSalt + "', num_kv_readers="
                + numKvReaders + (tags().isEmpty() ? "" : ", tags=" + tags()) + "]";
    }
}
