package io.lmcache.server.l2.s3;

import com.fasterxml.jackson.databind.JsonNode;
import io.lmcache.server.l2.AdapterIo;
import io.lmcache.server.l2.AdapterLedger;
import io.lmcache.server.l2.L2AdapterSpec;
import io.lmcache.server.l2.L2AdapterType;
import io.lmcache.server.l2.L2SpecException;
import java.io.IOException;
import java.util.Map;
import java.util.concurrent.ThreadFactory;

/** The {@code s3} type: S3 and S3-compatible stores, name- and byte-compatible with LMCache's {@code S3L2Adapter}. */
public final class S3Type implements L2AdapterType {
    @Override
    public String name() {
        return "s3";
    }

    @Override
    public S3Spec parse(JsonNode node, Map<String, String> env) throws L2SpecException {
        return S3Specs.parse(node);
    }

    @Override
    public AdapterIo open(L2AdapterSpec spec, ThreadFactory threads, AdapterLedger ledger) throws IOException {
        return new S3Io((S3Spec) spec, threads, ledger);
    }
}
