package io.lmcache.server.kvapi;

import com.sun.net.httpserver.Headers;
import com.sun.net.httpserver.HttpExchange;
import io.lmcache.server.http.AdminGuard;
import io.lmcache.server.http.HttpApi;
import io.lmcache.server.http.JsonBody;
import io.lmcache.server.http.JsonBody.Refused;
import io.lmcache.server.logging.LogText;
import io.lmcache.server.logging.RateLimitedLog;
import io.lmcache.server.metrics.ServerCatalogue;
import io.lmcache.server.metrics.ServerMetrics;
import io.lmcache.server.protocol.WireField;
import io.lmcache.server.transfer.ObjectGroup;
import java.io.BufferedInputStream;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.Semaphore;
import java.util.function.Function;
import java.util.function.Supplier;
import org.slf4j.LoggerFactory;

/**
 * The routes of LMCache's HTTP KV bytes API, raw v1 ({@code lmcache/v1/multiprocess/http_apis/kv_api.py@0f6d467d}, index id
 * 63013598693; fleet-and-operator-api.md §2.7 A) and the framed stream v1 ({@code kv_api.py@772fdcda} over {@code kv_protocol.py@9b3f101e};
 * §2.7 B): request and reply shapes, headers and status codes are LMCache's (errors as FastAPI's {@code {"detail": ...}}). Both
 * revisions answer on the same paths: a store is the stream's when its {@code Content-Type} is {@link KvFrames#MEDIA_TYPE}, a
 * retrieve when its JSON names a {@code protocol_version} or its {@code Accept} names the stream type. Unlike LMCache, which
 * guards none of them, all take the admin token as every mutation does here (they read and write tenants' chunks), and every body
 * is bounded before a byte of it is read: by its declared length, and a stream's frames each by its manifest.
 */
public final class KvBytesRoutes {
    static final String KV_CONTENT_TYPE = "application/x-lmcache-kv; v=1";
    static final String MODEL_HEADER = "X-LMCache-Model-Name";
    static final String TOKENS_HEADER = "X-LMCache-Tokens";
    static final String SALT_HEADER = "X-LMCache-Cache-Salt";
    /** Largest retrieve or lookup body: a JSON list of millions of token ids. */
    static final long MAX_JSON_BYTES = 32L << 20;
    /** Requests handled at once: each may hold a token list of up to {@link WireField#MAX_TOKENS} ints on the heap. */
    static final int MAX_CONCURRENT = 4;
    /** vLLM's {@code _MAX_CACHE_SALT_LENGTH}, as the ZeroMQ path and {@code /cache/objects} bound a salt. */
    static final int MAX_SALT_CHARS = 128;
    /** A stream store's framing on top of its chunks' bytes: the manifest's header and every chunk's ({@link KvBytesStream}). */
    static final long STREAM_FRAMING_BYTES = 2L * KvFrames.MAX_HEADER_BYTES;
    private static final String STREAM_TYPE = KvFrames.MEDIA_TYPE.substring(0, KvFrames.MEDIA_TYPE.indexOf(';'));
    /** pydantic's answer to a list longer than the model's {@code max_length}: 422. */
    private static final JsonBody.IntList TOKENS = new JsonBody.IntList(WireField.MAX_TOKENS, 422,
            "tokens has more than " + WireField.MAX_TOKENS + " entries");
    private static final RateLimitedLog REFUSED = new RateLimitedLog(LoggerFactory.getLogger(KvBytesRoutes.class), "refused KV bytes requests", 10);
    /** The statuses a refusal can have ({@link Refused}), declared so that a scrape shows them at zero. */
    private static final int[] REFUSAL_STATUSES = {400, 411, 413, 422, 503};
    private final Semaphore concurrent = new Semaphore(MAX_CONCURRENT);

    private final KvBytes bytes;
    /** Per world size, the object groups of a registered instance of a model; empty when this server has no LMCache-driven path. */
    private final Optional<Function<String, Map<Integer, List<ObjectGroup>>>> registered;
    private final int chunkSize;
    private final long maxStoreBytes;
    private final ServerMetrics metrics;

    /** {@code maxStoreBytes}: the largest store body (the L1 pool: a larger one could never land). */
    public KvBytesRoutes(KvBytes bytes, Optional<Function<String, Map<Integer, List<ObjectGroup>>>> registered, int chunkSize,
            long maxStoreBytes, ServerMetrics metrics) {
        this.bytes = bytes;
        this.registered = registered;
        this.chunkSize = chunkSize;
        this.maxStoreBytes = maxStoreBytes;
        this.metrics = metrics;
        for (int status : REFUSAL_STATUSES) {
            metrics.declare(ServerCatalogue.KV_API_REFUSED, Integer.toString(status));
        }
    }

    public void register(HttpApi api, AdminGuard guard) {
        // runs on: lmcache-http-* (one virtual thread per exchange)
        api.route("/api/kv/store", (method, exchange) -> post(method, exchange, () -> guard.checkBinary(exchange), () -> store(exchange)));
        api.route("/api/kv/retrieve", (method, exchange) -> post(method, exchange, () -> guard.check(exchange), () -> retrieve(exchange)));
        api.route("/api/kv/lookup", (method, exchange) -> post(method, exchange, () -> guard.check(exchange), () -> lookup(exchange)));
    }

    private interface Handler {
        HttpApi.Response handle() throws Refused, IOException;
    }

    /**
     * POST only; the guard's answer first, so that nothing of a refused request is parsed. What a refusal leaves unread of the
     * body, {@link HttpApi} swallows within bounds before it answers; so the handlers never close the body themselves.
     */
    private HttpApi.Response post(String method, HttpExchange exchange, Supplier<HttpApi.Response> guard, Handler handler)
            throws IOException {
        if (!method.equals("POST")) {
            return HttpApi.methodNotAllowed(method);
        }
        HttpApi.Response denied = guard.get();
        if (denied != null) {
            return denied;
        }
        try {
            concurrent.acquire();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return HttpApi.Response.json(503, Map.of("detail", "shutting down"));
        }
        try {
            return handler.handle();
        } catch (Refused e) {
            // a bad request is the client's: counted and logged rate-limited, never more than a reply
            metrics.increment(ServerCatalogue.KV_API_REFUSED, Integer.toString(e.status()));
            REFUSED.warn("HTTP KV bytes API {} refused with {}: {}", exchange.getRequestURI().getPath(), e.status(), LogText.clip(e.getMessage()));
            return HttpApi.Response.json(e.status(), Map.of("detail", e.getMessage()));
        } finally {
            concurrent.release();
        }
    }

    private HttpApi.Response store(HttpExchange exchange) throws Refused, IOException {
        Headers headers = exchange.getRequestHeaders();
        if (names(headers.getFirst("Content-Type"), STREAM_TYPE)) {
            return streamStore(exchange);
        }
        long declared = declaredLength(headers, maxStoreBytes);
        String model = headers.getFirst(MODEL_HEADER);
        if (model == null || model.isEmpty()) {
            throw new Refused(400, "missing " + MODEL_HEADER + " header");
        }
        int[] tokens = tokensHeader(headers.getFirst(TOKENS_HEADER));
        String salt = salt(headers.getFirst(SALT_HEADER));
        KvBytesLayout layout = layout(checkModel(model));
        long expected = (long) (tokens.length / chunkSize) * layout.chunkWireBytes();
        if (declared != expected) {
            throw new Refused(400, "payload length " + declared + " != expected " + expected + " (" + tokens.length / chunkSize
                    + " whole chunks x " + layout.worldSize() + " shards x " + layout.objectBytes() + " bytes)");
        }
        KvBytes.Counts counts;
        try {
            counts = bytes.store(model, tokens, salt, layout, exchange.getRequestBody());
        } catch (IOException e) {
            // every reservation was given back: nothing of it landed
            throw new Refused(400, "the body ended before its declared length");
        }
        return stored(counts);
    }

    /** Whether a {@code Content-Type} or {@code Accept} value names {@code type} (parameters and case aside). */
    static boolean names(String header, String type) {
        if (header == null) {
            return false;
        }
        for (String range : header.split(",")) {
            int semicolon = range.indexOf(';');
            if ((semicolon < 0 ? range : range.substring(0, semicolon)).strip().toLowerCase(Locale.ROOT).equals(type)) {
                return true;
            }
        }
        return false;
    }

    /**
     * The stream revision's store (LMCache {@code kv_api.store}, {@code kv_bytes.store_kv_bytes_by_tokens}): a {@code store_manifest}
     * frame, checked whole (model, dtype, shape, size) before the first chunk is read, then the chunks, each landed as it arrives.
     * A body may be chunked: its frames bound it, and a declared length is checked against the largest stream up front.
     */
    private HttpApi.Response streamStore(HttpExchange exchange) throws Refused, IOException {
        String declared = exchange.getRequestHeaders().getFirst("Content-Length");
        if (declared != null) {
            declaredLength(exchange.getRequestHeaders(), maxStoreBytes + STREAM_FRAMING_BYTES);
        }
        try {
            KvFrames.Reader frames = new KvFrames.Reader(new BufferedInputStream(exchange.getRequestBody(), 256 * 1024));
            KvFrames.Frame first = frames.next(0, KvFrames.MAX_HEADER_BYTES);
            if (first == null) {
                throw new Refused(400, "KV store request body is missing a manifest frame");
            }
            Manifest manifest = manifest(first.header());
            KvBytesLayout layout = layout(manifest.model);
            int chunks = manifest.tokens.length / chunkSize;
            if (chunks == 0) {
                // LMCache answers before reading on: whatever follows is left unread (HttpApi swallows it, bounded)
                return stored(new KvBytes.Counts(0, 0, 0, chunkSize));
            }
            checkManifest(manifest, layout, chunks);
            return stored(bytes.stream().store(manifest.model, manifest.tokens, manifest.salt, layout, frames));
        } catch (KvFrames.FrameException e) {
            throw new Refused(400, e.getMessage());
        } catch (IOException e) {
            throw new Refused(400, "the stream broke off: " + LogText.clip(String.valueOf(e.getMessage())));
        }
    }

    /** A {@code store_manifest}'s fields (LMCache's {@code decode_store_manifest}). */
    private record Manifest(String model, int[] tokens, String salt, int[] shape, String dtype) {}

    private static Manifest manifest(KvFrames.Header header) throws KvFrames.FrameException, Refused {
        header.requireType("store_manifest");
        String model = checkModel(header.requireString("model_name"));
        int[] tokens = header.requireIntList("tokens");
        String salt = salt(header.optionalString("cache_salt"));
        return new Manifest(model, tokens, salt, header.requireShape4("shape"), header.requireString("dtype"));
    }

    /** The manifest against the registered layout: its dtype and full shape, and a size the L1 pool could hold (413 as raw's). */
    private void checkManifest(Manifest manifest, KvBytesLayout layout, int chunks) throws Refused {
        String dtype = manifest.dtype.startsWith("torch.") ? manifest.dtype.substring("torch.".length()) : manifest.dtype;
        if (!dtype.equals(layout.dtype().torchName())) {
            throw new Refused(400, "payload dtype " + LogText.clip(manifest.dtype) + " does not match registered KV dtype " + layout.torchDtype());
        }
        int[] expected = layout.fullShape(chunks * chunkSize);
        if (!Arrays.equals(manifest.shape, expected)) {
            throw new Refused(400, "payload shape " + Arrays.toString(manifest.shape) + " does not match expected " + Arrays.toString(expected));
        }
        if ((long) chunks * layout.chunkWireBytes() > maxStoreBytes) {
            throw new Refused(413, "the payload is larger than " + maxStoreBytes + " bytes");
        }
    }

    private static HttpApi.Response stored(KvBytes.Counts counts) {
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("status", "ok");
        out.put("total_tokens", counts.totalTokens());
        out.put("total_chunks", counts.totalChunks());
        out.put("stored_tokens", counts.doneTokens());
        out.put("stored_chunks", counts.doneChunks());
        return HttpApi.Response.json(200, out);
    }

    private HttpApi.Response retrieve(HttpExchange exchange) throws Refused, IOException {
        Query query = query(exchange);
        boolean stream = query.protocolVersion != null || names(exchange.getRequestHeaders().getFirst("Accept"), STREAM_TYPE);
        if (stream && query.protocolVersion != null && query.protocolVersion != KvFrames.VERSION) {
            throw new Refused(400, "unsupported KV protocol version " + query.protocolVersion + "; expected " + KvFrames.VERSION);
        }
        KvBytesLayout layout = layout(query.model);
        KvBytes.Retrieved retrieved = bytes.retrieve(query.model, query.tokens, query.salt, layout);
        if (stream) {
            return streamed(query.model, retrieved, layout);
        }
        KvBytes.Counts counts = retrieved.counts();
        Headers out = exchange.getResponseHeaders();
        out.set("X-LMCache-Hit-Tokens", Integer.toString(counts.doneTokens()));
        out.set("X-LMCache-Hit-Chunks", Integer.toString(counts.doneChunks()));
        out.set("X-LMCache-Total-Tokens", Integer.toString(counts.totalTokens()));
        out.set("X-LMCache-Total-Chunks", Integer.toString(counts.totalChunks()));
        if (counts.doneChunks() == 0) {
            retrieved.close();
            return new HttpApi.Response(404, KV_CONTENT_TYPE, new byte[0]);
        }
        // the dispatcher writes the body after the headers and closes it (the objects' pins) sent or not
        return HttpApi.Response.streamed(200, KV_CONTENT_TYPE, retrieved);
    }

    /** The stream revision's retrieve: 200 and the manifest also on a miss; the pins held until the stream is written or dropped. */
    private HttpApi.Response streamed(String model, KvBytes.Retrieved retrieved, KvBytesLayout layout) {
        KvBytesStream.Retrieval stream;
        try {
            stream = bytes.streamOf(model, retrieved, layout);
        } catch (RuntimeException e) {
            retrieved.close();
            throw e;
        }
        return HttpApi.Response.streamed(200, KvFrames.MEDIA_TYPE, stream);
    }

    private HttpApi.Response lookup(HttpExchange exchange) throws Refused, IOException {
        Query query = query(exchange);
        KvBytes.Counts counts = bytes.lookup(query.model, query.tokens, query.salt, layout(query.model));
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("total_tokens", counts.totalTokens());
        out.put("total_chunks", counts.totalChunks());
        out.put("hit_tokens", counts.doneTokens());
        out.put("hit_chunks", counts.doneChunks());
        return HttpApi.Response.json(200, out);
    }

    /**
     * A retrieve's or lookup's JSON body ({@code {model_name, tokens, cache_salt: "", protocol_version}}, the last the stream
     * revision's, null when absent); pydantic's 422 when it does not fit.
     */
    private record Query(String model, int[] tokens, String salt, Integer protocolVersion) {}

    private static Query query(HttpExchange exchange) throws Refused, IOException {
        declaredLength(exchange.getRequestHeaders(), MAX_JSON_BYTES);
        // parsed as it streams in: the token list goes straight into an int array, never a tree of nodes
        return JsonBody.read(exchange.getRequestBody(), KvBytesRoutes::queryFields);
    }

    private static Query queryFields(JsonBody.Reader body) throws Refused, IOException {
        String model = null;
        String salt = "";
        int[] tokens = null;
        Integer protocolVersion = null;
        while (body.nextField()) {
            switch (body.field()) {
                case "model_name" -> model = body.text();
                case "cache_salt" -> salt = body.text();
                case "tokens" -> tokens = body.ints(TOKENS);
                case "protocol_version" -> protocolVersion = body.integer("an int");
                default -> body.skip();
            }
        }
        if (model == null || tokens == null) {
            throw new Refused(422, "the body must be {\"model_name\": str, \"tokens\": [int], \"cache_salt\": str}");
        }
        return new Query(checkModel(model), tokens, salt(salt), protocolVersion);
    }

    /** The declared body length, checked against {@code max} before a byte is read (411 without one, 413 above it). */
    private static long declaredLength(Headers headers, long max) throws Refused {
        String value = headers.getFirst("Content-Length");
        if (value == null) {
            if ("chunked".equalsIgnoreCase(headers.getFirst("Transfer-Encoding"))) {
                throw new Refused(411, "a body of declared length is needed (Content-Length)");
            }
            return 0;
        }
        long length;
        try {
            length = Long.parseLong(value.strip());
        } catch (NumberFormatException e) {
            throw new Refused(400, "Content-Length is not a number");
        }
        if (length > max) {
            throw new Refused(413, "the body is larger than " + max + " bytes");
        }
        return length;
    }

    /** LMCache's {@code _parse_int_list}: comma-separated ints, empty entries skipped; at least one token. */
    private static int[] tokensHeader(String value) throws Refused {
        if (value == null || value.isEmpty()) {
            throw new Refused(400, TOKENS_HEADER + " header must contain at least one token");
        }
        String[] parts = value.split(",");
        if (parts.length > WireField.MAX_TOKENS) {
            throw new Refused(400, TOKENS_HEADER + " has more than " + WireField.MAX_TOKENS + " tokens");
        }
        int[] tokens = new int[parts.length];
        int n = 0;
        for (String part : parts) {
            if (part.isEmpty()) {
                continue;
            }
            try {
                tokens[n++] = Integer.parseInt(part.strip());
            } catch (NumberFormatException e) {
                throw new Refused(400, TOKENS_HEADER + " must be a comma-separated list of ints");
            }
        }
        if (n == 0) {
            throw new Refused(400, TOKENS_HEADER + " header must contain at least one token");
        }
        return n == tokens.length ? tokens : Arrays.copyOf(tokens, n);
    }

    private static String checkModel(String model) throws Refused {
        if (model.getBytes(StandardCharsets.UTF_8).length > WireField.MODEL_NAME.max()) {
            throw new Refused(400, "model_name is longer than " + WireField.MODEL_NAME.max() + " bytes");
        }
        return model;
    }

    private static String salt(String salt) throws Refused {
        if (salt == null) {
            return "";
        }
        if (salt.codePointCount(0, salt.length()) > MAX_SALT_CHARS || salt.getBytes(StandardCharsets.UTF_8).length > WireField.CACHE_SALT.max()) {
            throw new Refused(400, "cache_salt is longer than " + MAX_SALT_CHARS + " characters");
        }
        return salt;
    }

    /** The model's layout: LMCache's 503 without an engine, 400 for a model no worker registered or a layout v1 cannot carry. */
    private KvBytesLayout layout(String model) throws Refused {
        if (registered.isEmpty()) {
            throw new Refused(503, "engine not initialized");
        }
        Map<Integer, List<ObjectGroup>> byWorldSize = registered.get().apply(model);
        if (byWorldSize.isEmpty()) {
            throw new Refused(400, "model_name '" + LogText.clip(model) + "' is not registered with this engine");
        }
        Map.Entry<Integer, List<ObjectGroup>> first = byWorldSize.entrySet().iterator().next();
        KvBytesLayout layout = KvBytesLayout.of(first.getKey(), first.getValue(), chunkSize);
        if (layout == null) {
            throw new Refused(400, "unsupported KV layout for '" + LogText.clip(model) + "': v1 carries one full-attention KV_2LTD layer group");
        }
        return layout;
    }
}
