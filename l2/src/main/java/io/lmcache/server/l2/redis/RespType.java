package io.lmcache.server.l2.redis;

import com.fasterxml.jackson.databind.JsonNode;
import io.lmcache.server.l2.AdapterIo;
import io.lmcache.server.l2.AdapterLedger;
import io.lmcache.server.l2.L2AdapterSpec;
import io.lmcache.server.l2.L2AdapterType;
import io.lmcache.server.l2.L2SpecException;
import java.util.Map;
import java.util.concurrent.ThreadFactory;

/** The {@code resp} type: one Redis or Valkey node, LMCache's {@code LMCACHE_RESP_*} overrides taken from the environment. */
public final class RespType implements L2AdapterType {
    @Override
    public String name() {
        return "resp";
    }

    @Override
    public RedisSpec parse(JsonNode node, Map<String, String> env) throws L2SpecException {
        return RedisSpecs.resp(node, env);
    }

    @Override
    public AdapterIo open(L2AdapterSpec spec, ThreadFactory threads, AdapterLedger ledger) {
        return new RedisIo((RedisSpec) spec, threads, ledger);
    }
}
