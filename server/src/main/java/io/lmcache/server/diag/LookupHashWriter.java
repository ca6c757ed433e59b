package io.lmcache.server.diag;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.lmcache.server.agent.Agent;
import io.lmcache.server.logging.LogText;
import io.lmcache.server.logging.RateLimitedLog;
import io.lmcache.server.protocol.CacheKey;
import io.lmcache.server.storage.ChunkHash;
import io.lmcache.server.tier.ObjectShapes;
import io.lmcache.server.transfer.ChunkHashes;
import java.io.IOException;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.LongAdder;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The writing side of the lookup-hash log, on {@code lmcache-lookup-hashes}: takes the queued LOOKUPs of {@link LookupHashLog},
 * hashes their whole chunks (the chain the LOOKUP used, from the remembered chains when it computed them), and writes one line each
 * with LMCache's fields ({@code lookup_hash.py@366ac586}, {@code _on_lookup_hashes}): {@code timestamp}, {@code request_id},
 * {@code model_name}, {@code chunk_size}, {@code seq_len} (every token of the key, the partial last chunk included),
 * {@code dtypes}, {@code shapes} ({@link LayoutDesc}; empty before the model's first REGISTER), {@code chunk_hashes}
 * ({@code "0x"} and the 32-byte hash in hex, LMCache's form for a bytes hash, whole chunks only, in order).
 */
final class LookupHashWriter implements Agent {
    private static final Logger LOG = LoggerFactory.getLogger(LookupHashWriter.class);
    private static final RateLimitedLog FAILED = new RateLimitedLog(LOG, "lookup-hash log write failures", 10);
    private static final ObjectMapper JSON = new ObjectMapper();
    private static final HexFormat HEX = HexFormat.of();
    /** LOOKUPs written per turn: the thread looks up from its work between them. */
    private static final int BATCH = 64;

    private final LookupHashLog log;
    private final LookupHashFiles files;
    private final ObjectShapes shapes;
    private final int chunkSize;
    final LongAdder lines = new LongAdder();
    final LongAdder writeErrors = new LongAdder();

    LookupHashWriter(LookupHashLog log, LookupHashFiles files, ObjectShapes shapes, int chunkSize) {
        this.log = log;
        this.files = files;
        this.shapes = shapes;
        this.chunkSize = chunkSize;
    }

    @Override
    public int doWork() {
        int done = 0;
        for (LookupHashLog.Entry entry; done < BATCH && (entry = log.poll()) != null; done++) {
            write(entry);
        }
        return done;
    }

    private void write(LookupHashLog.Entry entry) {
        try {
            files.write(entry.epochSeconds(), line(entry));
            lines.increment();
        } catch (IOException | RuntimeException e) {
            writeErrors.increment();
            FAILED.warn("lookup-hash log: a line could not be written: {}", LogText.clip(String.valueOf(e)));
        }
    }

    /** The JSON line of one LOOKUP, LMCache's fields in LMCache's order. */
    String line(LookupHashLog.Entry entry) throws JsonProcessingException {
        CacheKey key = entry.key();
        byte[] hashes = ChunkHashes.of(key, chunkSize, entry.endChunk());
        List<String> hex = new ArrayList<>(entry.endChunk());
        for (int chunk = 0; chunk < entry.endChunk(); chunk++) {
            hex.add("0x" + HEX.formatHex(hashes, chunk * ChunkHash.BYTES, (chunk + 1) * ChunkHash.BYTES));
        }
        LayoutDesc layout = LayoutDesc.of(shapes.shapes(key.modelName(), key.worldSize()));
        Map<String, Object> line = new LinkedHashMap<>();
        line.put("timestamp", entry.epochSeconds());
        line.put("request_id", key.requestId());
        line.put("model_name", key.modelName());
        line.put("chunk_size", chunkSize);
        line.put("seq_len", key.tokenIds().length);
        line.put("dtypes", layout.dtypes());
        line.put("shapes", layout.shapes());
        line.put("chunk_hashes", hex);
        return JSON.writeValueAsString(line);
    }

    @Override
    public String roleName() {
        return "lookup-hash log";
    }

    /** The LOOKUPs still queued are written, then the file is closed. */
    @Override
    public void onClose() {
        while (doWork() > 0) {
            // drain
        }
        try {
            files.close();
        } catch (IOException e) {
            LOG.warn("lookup-hash log: closing the file failed: {}", LogText.clip(String.valueOf(e)));
        }
    }
}
