package io.lmcache.server.protocol;

/**
 * LMCache's {@code LayoutHints} TypedDict: every key optional. vLLM sends {@code {"kv_layout": "NHD"|"HND"}} or {}.
 *
 * @param kvLayout empty when absent
 * @param numKvHeads 0 when absent
 * @param tokensPerBlock 0 when absent
 * @param headDim 0 when absent
 */
public record LayoutHints(String kvLayout, int numKvHeads, int tokensPerBlock, int headDim) {
    public static final LayoutHints NONE = new LayoutHints("", 0, 0, 0);

    public boolean isHnd() {
        return kvLayout.equalsIgnoreCase("HND");
    }
}
