package io.lmcache.server.protocol;

/** One entry of REPORT_BLOCK_ALLOCATION: vLLM's new blocks and tokens for a request (observability only). */
public record BlockAllocationRecord(String reqId, int[] newBlockIds, int[] newTokenIds) {}
