package io.lmcache.server.transfer;

/**
 * SGLang's padding page ({@link SglangLayouts#NULL_PAGE}) in a transfer's page list: never copied to or from. SGLang's connector
 * fills the pages of a RETRIEVE's already-cached head with it as placeholders and sends their count, in pages, where vLLM sends
 * a token count ({@code lmcache/integration/sglang/multi_process_adapter.py@6f45e604}, {@code retrieve_kv}: {@code block_ids =
 * [0] * prefix_pad_pages + fresh_block_ids}, skip {@code prefix_pad // page_size}); LMCache's own reading of that unit is open
 * (newest-clients.md Q4). So a RETRIEVE leaves its leading placeholders alone whatever the skip says, and a placeholder anywhere
 * else, or in a STORE (whose pages SGLang's allocator hands out from 1), refuses the request.
 */
public final class NullPages {
    private NullPages() {}

    /** Null when {@code ids} (the first {@code count} of the group's list) is fine for this transfer, else why not. */
    static String check(KernelGroup kernel, int[] ids, int count, int requestedSkip, boolean store) {
        if (!kernel.layout().sglang()) {
            return null;
        }
        int from = store ? 0 : Math.max(leading(ids, count), Math.max(0, requestedSkip) / kernel.tokensPerBlock());
        for (int b = from; b < count; b++) {
            if (ids[b] == SglangLayouts.NULL_PAGE) {
                return "page id " + SglangLayouts.NULL_PAGE + " (SGLang's padding page) at position " + b + " of a "
                        + (store ? "STORE: it holds no request's KV" : "RETRIEVE, after its leading placeholders");
            }
        }
        return null;
    }

    /**
     * The tokens at the head of a RETRIEVE's range that must not be written: the requested skip, or more where the leading page
     * ids are SGLang's placeholders. Other layouts: the requested skip.
     */
    public static int retrieveSkip(CacheGeometry geometry, int[][] blockIds, int requestedSkip) {
        KernelGroup kernel = geometry.kernels().getFirst();
        if (!kernel.layout().sglang() || blockIds.length == 0 || requestedSkip < 0) {
            return requestedSkip;
        }
        long placeholders = (long) leading(blockIds[0], blockIds[0].length) * kernel.tokensPerBlock();
        return (int) Math.min(Integer.MAX_VALUE, Math.max(requestedSkip, placeholders));
    }

    private static int leading(int[] ids, int count) {
        int n = 0;
        while (n < Math.min(count, ids.length) && ids[n] == SglangLayouts.NULL_PAGE) {
            n++;
        }
        return n;
    }
}
