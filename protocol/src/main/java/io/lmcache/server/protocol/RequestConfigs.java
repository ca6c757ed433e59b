package io.lmcache.server.protocol;

/**
 * The two entries of a key's {@code request_configs} (the request's {@code kv_transfer_params}) the server acts on; the rest are
 * skipped. Both are LMCache's names in {@code lmcache/v1/multiprocess/kv_load_policy.py} (stored id 71012400894):
 * {@code lmcache.skip_load} asks the default load policy to let the engine recompute the request, and
 * {@code lmcache.hint.engine_computed_tokens} is the number of prompt tokens the engine already holds in its own prefix cache
 * (absent when the connector does not know it yet).
 *
 * The {@code lmcache.tag.*} entries are the request's identity tags ({@link RequestTags}), part of every key.
 *
 * @param engineComputedTokens {@link #UNKNOWN} when absent or not a non-negative int
 * @param tags the request's tags, sorted ({@link RequestTags#NONE} without)
 */
public record RequestConfigs(boolean skipLoad, int engineComputedTokens, RequestTags tags) {
    public static final int UNKNOWN = -1;
    public static final RequestConfigs NONE = new RequestConfigs(false, UNKNOWN, RequestTags.NONE);
    public static final String SKIP_LOAD = "lmcache.skip_load";
    public static final String ENGINE_COMPUTED_TOKENS = "lmcache.hint.engine_computed_tokens";

    /** The load controls alone, without tags. */
    public RequestConfigs(boolean skipLoad, int engineComputedTokens) {
        this(skipLoad, engineComputedTokens, RequestTags.NONE);
    }

    /** Only the tags. */
    public static RequestConfigs tagged(RequestTags tags) {
        return tags.isEmpty() ? NONE : new RequestConfigs(false, UNKNOWN, tags);
    }
}
