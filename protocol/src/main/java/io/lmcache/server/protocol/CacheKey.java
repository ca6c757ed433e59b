package io.lmcache.server.protocol;

/**
 * LMCache's {@code IPCCacheServerKey}: the full token list of a request plus the token range
 * {@code [start, end)} an operation covers. Identity for storage comes from model, world size,
 * worker (kv rank), the tokens and the cache salt; {@code requestId}, {@code numKvReaders} and
 * {@code request_configs} (of which only the load controls are kept: {@link RequestConfigs}) are not part of it.
 *
 * @param workerId the kv rank, or {@link #NO_WORKER} (msgpack nil) for a scheduler LOOKUP
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


    public boolean hasWorker() {
        return workerId != NO_WORKER;
    }

    @Override
    public String toString() {
        return "CacheKey[model=" + modelName + ", world_size=" + worldSize + ", worker_id="
                + (hasWorker() ? Integer.toString(workerId) : "None") + ", tokens=" + tokenIds.length + ", range=["
                + start + ", " + end + "), request_id=" + requestId + ", cache_salt='" + cacheSalt + "', num_kv_readers="
                + numKvReaders + "]";
    }
}
