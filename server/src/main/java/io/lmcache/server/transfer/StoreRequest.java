package io.lmcache.server.transfer;

import io.lmcache.server.protocol.CacheKey;
import io.lmcache.server.storage.StoreListener;

/** What a GPU STORE's committed objects came from: its plan (chunks, groups, hash chain) and key (model, tokens, salt). */
public record StoreRequest(TransferPlan plan, CacheKey key) implements StoreListener.Origin {}
