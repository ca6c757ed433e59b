package io.lmcache.server.l2.s3;

import io.lmcache.server.l2.AdapterIo;
import io.lmcache.server.l2.AdapterLedger;
import io.lmcache.server.l2.KeyPage;
import io.lmcache.server.l2.L2Key;
import io.lmcache.server.l2.redis.FailureLog;
import io.lmcache.server.l2.redis.LentBuffers;
import io.lmcache.server.l2.redis.NodeBreakers;
import io.lmcache.server.l2.redis.ValueWindow;
import java.io.IOException;
import java.lang.foreign.MemorySegment;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ScheduledThreadPoolExecutor;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.ThreadFactory;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.LongAdder;
import java.util.function.BiConsumer;
import java.util.function.Consumer;
import java.util.function.Supplier;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import software.amazon.awssdk.auth.credentials.AwsBasicCredentials;
import software.amazon.awssdk.auth.credentials.AwsCredentialsProvider;
import software.amazon.awssdk.auth.credentials.DefaultCredentialsProvider;
import software.amazon.awssdk.auth.credentials.StaticCredentialsProvider;
import software.amazon.awssdk.awscore.exception.AwsServiceException;
import software.amazon.awssdk.core.checksums.RequestChecksumCalculation;
import software.amazon.awssdk.core.checksums.ResponseChecksumValidation;
import software.amazon.awssdk.core.client.config.ClientAsyncConfiguration;
import software.amazon.awssdk.core.client.config.SdkAdvancedAsyncClientOption;
import software.amazon.awssdk.http.async.SdkAsyncHttpClient;
import software.amazon.awssdk.http.nio.netty.NettyNioAsyncHttpClient;
import software.amazon.awssdk.http.nio.netty.SdkEventLoopGroup;
import software.amazon.awssdk.regions.Region;
import software.amazon.awssdk.services.s3.S3AsyncClient;
import software.amazon.awssdk.services.s3.model.HeadObjectResponse;
import software.amazon.awssdk.services.s3.model.ListObjectsV2Response;
import software.amazon.awssdk.services.s3.model.S3Object;

/**
 * The I/O of {@code s3} (docs/l2-s3.md; LMCache/LMCache {@code lmcache/v1/distributed/l2_adapters/s3_l2_adapter.py} @000e8777): each
 * key's raw object bytes under LMCache's name ({@link L2Key#wireKey}, the valkey key without a prefix) at the bucket root. PUT per key
 * for a store (always overwriting, as LMCache), HEAD per key for a lookup (a hit is a 200 whose {@code Content-Length} is the object's
 * size; another size is a miss, counted), GET per key straight into the caller's buffer for a load (the size checked before any byte
 * is copied), DELETE for eviction. Three connection failures in a row open the breaker (LMCache's rule; an HTTP answer of any status
 * never moves it): every key is then a miss at once until a probe (HEAD bucket) answers, first after
 * {@code s3_breaker_initial_cooldown_s}, doubling to {@code s3_breaker_max_cooldown_s}.
 *
 * <p>The client is the SDK's {@link S3AsyncClient} over its Netty HTTP client, not the CRT-based one LMCache's Python uses: the Netty
 * client is pure Java on the Netty this server already runs (Lettuce's), needs no native library in the image, and does all this
 * adapter asks (SigV4, virtual-hosted and path-style, a streamed body of known length, a response streamed into our buffer with its
 * length known first). One retry only (a miss is cheap; L1 serves), so an outage costs two connection attempts per key until the
 * breaker opens.
 */
final class S3Io implements AdapterIo {
    private static final Logger LOG = LoggerFactory.getLogger(S3Io.class);
    private static final Duration CONNECT_TIMEOUT = Duration.ofSeconds(5);
    /** HEAD and DELETE: small answers. PUT and GET move whole objects (tens of MiB over a WAN). */
    private static final Duration CONTROL_TIMEOUT = Duration.ofSeconds(10);
    private static final Duration VALUE_TIMEOUT = Duration.ofSeconds(60);
    private static final long PROBE_TIMEOUT_NS = TimeUnit.SECONDS.toNanos(2);
    /** LMCache's {@code _is_connection_error} count: three in a row open the breaker. */
    private static final int OPEN_AFTER_FAILURES = 3;
    /** One retry: a keep-alive connection the server closed meanwhile fails the request sent on it, and a resend succeeds. */
    private static final int MAX_ATTEMPTS = 2;
    private static final long CLOSE_WAIT_NS = TimeUnit.SECONDS.toNanos(5);

    private final S3Spec spec;
    private final AdapterLedger ledger;
    private final String name;
    private final ScheduledThreadPoolExecutor scheduler;
    private final S3AsyncClient client;
    private final FailureLog failures;
    private final NodeBreakers breakers;
    private final ValueWindow window;
    private final LentBuffers<LentSegment> lent = new LentBuffers<>();
    private final LongAdder puts = new LongAdder();
    private final LongAdder gets = new LongAdder();
    private final LongAdder heads = new LongAdder();
    private final LongAdder deletes = new LongAdder();
    private final LongAdder storedKeys = new LongAdder();
    private final LongAdder lookupHits = new LongAdder();
    private final LongAdder loadedKeys = new LongAdder();
    private final LongAdder loadMisses = new LongAdder();
    private final LongAdder sizeMismatches = new LongAdder();
    private final LongAdder forbidden = new LongAdder();
    private final LongAdder shortBodies = new LongAdder();
    private final LongAdder connectionFailures = new LongAdder();

    /**
     * Builds the client (no request is sent: a store that is down at start is a breaker that opens, not a start failure).
     *
     * @throws IOException when no credentials are given and the default chain finds none
     */
    S3Io(S3Spec spec, ThreadFactory threads, AdapterLedger ledger) throws IOException {
        this.spec = spec;
        this.ledger = ledger;
        this.name = "s3 " + spec.endpoint();
        AwsCredentialsProvider credentials = credentials(spec);
        this.scheduler = new ScheduledThreadPoolExecutor(1, threads);
        scheduler.setRemoveOnCancelPolicy(true);
        SdkAsyncHttpClient http = NettyNioAsyncHttpClient.builder()
                .maxConcurrency(2 * spec.numIoThreads())
                .connectionTimeout(CONNECT_TIMEOUT)
                .eventLoopGroupBuilder(SdkEventLoopGroup.builder().numberOfThreads(Math.min(spec.numIoThreads(), 2 * Runtime.getRuntime()
                        .availableProcessors())).threadFactory(threads))
                .build();
        this.client = S3AsyncClient.builder()
                .httpClient(http)
                .region(Region.of(spec.region()))
                .endpointOverride(spec.connectUri())
                .forcePathStyle(spec.pathStyle())
                .credentialsProvider(credentials)
                // LMCache's objects carry no checksum (the CRT's default AWS_SCA_NONE); S3-compatible stores need not know the trailer
                .requestChecksumCalculation(RequestChecksumCalculation.WHEN_REQUIRED)
                .responseChecksumValidation(ResponseChecksumValidation.WHEN_REQUIRED)
                .overrideConfiguration(o -> o.apiCallTimeout(VALUE_TIMEOUT).retryStrategy(b -> b.maxAttempts(MAX_ATTEMPTS)))
                // callbacks only count and hand answers on: they run on the Netty thread that completes the request
                .asyncConfiguration(ClientAsyncConfiguration.builder().advancedOption(SdkAdvancedAsyncClientOption.FUTURE_COMPLETION_EXECUTOR,
                        Runnable::run).build())
                .build();
        this.failures = new FailureLog(LOG, name);
        this.breakers = new NodeBreakers(LOG, name, scheduler, node -> probe(), new NodeBreakers.Policy(OPEN_AFTER_FAILURES,
                spec.breakerInitialCooldownNs(), spec.breakerMaxCooldownNs(), PROBE_TIMEOUT_NS), PROBE_TIMEOUT_NS);
        this.window = new ValueWindow(spec.numIoThreads(), scheduler);
        LOG.info("{}: bucket {} at {}{}, region {}, {} credentials, {} values in flight", name, spec.bucket(), spec.connectUri(),
                spec.pathStyle() ? " (path-style)" : "", spec.region(), spec.staticCredentials() ? "static" : "default-chain",
                spec.numIoThreads());
    }

    private static AwsCredentialsProvider credentials(S3Spec spec) throws IOException {
        if (spec.staticCredentials()) {
            return StaticCredentialsProvider.create(AwsBasicCredentials.create(spec.accessKeyId(), spec.secretAccessKey()));
        }
        DefaultCredentialsProvider chain = DefaultCredentialsProvider.builder().build();
        try {
            chain.resolveCredentials();
        } catch (RuntimeException e) {
            throw new IOException("s3: no aws_access_key_id/aws_secret_access_key given and the default credential chain found none ("
                    + FailureLog.describe(e) + ")");
        }
        return chain;
    }

    @Override
    public String typeName() {
        return "S3L2Adapter";
    }

    /** The breaker is open (or the adapter closed): the whole task answers at once, its keys counted once. */
    @Override
    public boolean accepts(Op op, int keys) {
        if (ledger.closed()) {
            failures.failed("closed", keys, op.name().toLowerCase(Locale.ROOT) + " of " + keys + " key(s)", null);
            return false;
        }
        boolean allowed = true;
        for (int i = 0; i < keys; i++) {
            allowed &= breakers.allows(spec.endpoint());
        }
        if (!allowed) {
            failures.failed("breaker_open", keys, op.name().toLowerCase(Locale.ROOT) + " of " + keys + " key(s) while " + spec.endpoint()
                    + " does not answer", null);
        }
        return allowed;
    }

    // --- store, lookup, load -----------------------------------------------------------------------

    @Override
    public void store(L2Key key, MemorySegment object, Consumer<Stored> done) {
        LentSegment value = lend(object);
        String objectName = key.wireKey();
        window.submit(() -> sendValue(value, () -> client.putObject(b -> b.bucket(spec.bucket()).key(objectName).contentLength(value
                .size()).contentType("application/octet-stream").overrideConfiguration(o -> o.apiCallTimeout(VALUE_TIMEOUT)),
                new SegmentBody(value)), (reply, error) -> {
            puts.increment();
            if (error == null) {
                storedKeys.increment();
                succeeded();
                done.accept(Stored.WROTE);
            } else {
                failed(error, "PUT " + objectName);
                done.accept(Stored.FAILED);
            }
        }));
    }

    /** HEAD per key, all sent at once; a hit is an object of exactly the expected size (any size when its group is not given). */
    @Override
    public void lookup(List<L2Key> keys, Map<Integer, Long> objectBytesByGroup, KeyAnswers found) {
        for (int i = 0; i < keys.size(); i++) {
            int index = i;
            L2Key key = keys.get(i);
            String objectName = key.wireKey();
            Long expected = objectBytesByGroup.get(key.objectGroup());
            CompletableFuture<HeadObjectResponse> head;
            try {
                head = client.headObject(b -> b.bucket(spec.bucket()).key(objectName).overrideConfiguration(o -> o.apiCallTimeout(
                        CONTROL_TIMEOUT)));
            } catch (RuntimeException e) {
                head = CompletableFuture.failedFuture(e);
            }
            head.whenComplete((reply, error) -> {
                heads.increment();
                found.answer(index, looked(objectName, expected, reply, error));
            });
        }
    }

    private boolean looked(String objectName, Long expected, HeadObjectResponse reply, Throwable error) {
        if (error != null) {
            int status = status(error);
            if (status == 404) {
                breakers.answered(spec.endpoint());
            } else if (status == 403) {
                forbidden.increment(); // without s3:ListBucket S3 answers 403 for a missing object: a miss, counted apart
                breakers.answered(spec.endpoint());
            } else {
                failed(error, "HEAD " + objectName);
            }
            return false;
        }
        succeeded();
        Long length = reply.contentLength();
        boolean hit = length != null && length > 0 && (expected == null || length.longValue() == expected);
        if (hit) {
            lookupHits.increment();
        } else if (length != null && length > 0) {
            sizeMismatches.increment(); // another layout under this model name, a half-written copy, a stranger's object
        }
        return hit;
    }

    @Override
    public void load(List<L2Key> keys, List<MemorySegment> buffers, KeyAnswers loaded) {
        for (int i = 0; i < keys.size(); i++) {
            int index = i;
            LentSegment target = lend(buffers.get(i));
            String objectName = keys.get(i).wireKey();
            window.submit(() -> sendValue(target, () -> client.getObject(b -> b.bucket(spec.bucket()).key(objectName)
                    .overrideConfiguration(o -> o.apiCallTimeout(VALUE_TIMEOUT)), new SegmentSink(target)), (outcome, error) -> {
                gets.increment();
                loaded.answer(index, loaded(objectName, outcome, error));
            }));
        }
    }

    private boolean loaded(String objectName, SegmentSink.Outcome outcome, Throwable error) {
        if (error != null) {
            if (status(error) == 404) {
                loadMisses.increment(); // gone since the lookup (another server evicted it, a lifecycle rule): a miss, not a fault
                breakers.answered(spec.endpoint());
            } else {
                failed(error, "GET " + objectName);
            }
            return false;
        }
        succeeded();
        switch (outcome) {
            case LOADED -> {
                loadedKeys.increment();
                return true;
            }
            case WRONG_SIZE -> sizeMismatches.increment();
            case SHORT_BODY -> shortBodies.increment();
        }
        failures.failed(outcome == SegmentSink.Outcome.WRONG_SIZE ? "format_mismatch_size" : "load_short_body", 1, "GET " + objectName
                + " answered an object of another size than expected", null);
        return false;
    }

    // --- requests --------------------------------------------------------------------------------

    private LentSegment lend(MemorySegment segment) {
        return lent.lend(new LentSegment(segment));
    }

    /** A PUT or GET holding a place in the window; the buffer goes back and the place is freed before {@code done} runs. */
    private <T> void sendValue(LentSegment buffer, Supplier<CompletableFuture<T>> request, BiConsumer<T, Throwable> done) {
        BiConsumer<T, Throwable> giveBack = (value, error) -> {
            lent.giveBack(buffer);
            window.release();
            done.accept(value, error);
        };
        if (ledger.closed()) {
            // waited in the window past close: never sent
            giveBack.accept(null, new IllegalStateException("the adapter is closed"));
            return;
        }
        CompletableFuture<T> sent;
        try {
            sent = request.get();
        } catch (RuntimeException e) {
            sent = CompletableFuture.failedFuture(e);
        }
        sent.whenComplete(giveBack);
    }

    private void succeeded() {
        breakers.answered(spec.endpoint());
        failures.succeeded();
    }

    /** An HTTP answer (any status) is an answer; no answer at all (refused, reset, timed out) moves the breaker. */
    private void failed(Throwable error, String what) {
        Throwable cause = unwrap(error);
        String reason;
        if (cause instanceof AwsServiceException service) {
            breakers.answered(spec.endpoint());
            reason = "http_" + service.statusCode();
        } else if (cause instanceof IllegalStateException) {
            reason = "closed";
        } else {
            connectionFailures.increment();
            breakers.timedOut(spec.endpoint());
            reason = "connection";
        }
        failures.failed(reason, 1, what, cause);
    }

    private static int status(Throwable error) {
        return unwrap(error) instanceof AwsServiceException service ? service.statusCode() : 0;
    }

    private static Throwable unwrap(Throwable error) {
        Throwable cause = error;
        while ((cause instanceof CompletionException || cause instanceof ExecutionException) && cause.getCause() != null) {
            cause = cause.getCause();
        }
        return cause;
    }

    /** HEAD bucket: any HTTP answer (a 403 too) says the endpoint is reachable. */
    private CompletableFuture<Boolean> probe() {
        try {
            return client.headBucket(b -> b.bucket(spec.bucket())).handle((reply, error) -> error == null
                    || unwrap(error) instanceof AwsServiceException);
        } catch (RuntimeException e) {
            return CompletableFuture.completedFuture(false);
        }
    }

    // --- delete, status, close -------------------------------------------------------------------

    /**
     * HEAD, then DELETE when it is there (also while closing: persist_enabled false deletes after the drain). S3 answers a DELETE
     * 204 whether or not the object existed, and eviction must know which it removed; nothing is sent while the breaker is open.
     */
    @Override
    public void delete(L2Key key, Consumer<Deleted> done) {
        if (breakers.state(spec.endpoint()) != NodeBreakers.State.CLOSED) {
            done.accept(Deleted.FAILED);
            return;
        }
        String objectName = key.wireKey();
        send(() -> client.headObject(b -> b.bucket(spec.bucket()).key(objectName).overrideConfiguration(o -> o.apiCallTimeout(
                CONTROL_TIMEOUT))), (head, headError) -> {
            heads.increment();
            if (headError != null) {
                if (status(headError) == 404) {
                    breakers.answered(spec.endpoint());
                    done.accept(Deleted.GONE); // evicted by another server, or by a lifecycle rule
                } else {
                    failed(headError, "HEAD " + objectName);
                    done.accept(Deleted.FAILED);
                }
                return;
            }
            send(() -> client.deleteObject(b -> b.bucket(spec.bucket()).key(objectName).overrideConfiguration(o -> o.apiCallTimeout(
                    CONTROL_TIMEOUT))), (reply, error) -> {
                deletes.increment();
                if (error == null) {
                    succeeded();
                    done.accept(Deleted.REMOVED);
                } else {
                    failed(error, "DELETE " + objectName);
                    done.accept(Deleted.FAILED);
                }
            });
        });
    }

    /** Sends one request; a client that throws instead of failing the future answers the same way. */
    private static <T> void send(Supplier<CompletableFuture<T>> request, BiConsumer<T, Throwable> done) {
        CompletableFuture<T> sent;
        try {
            sent = request.get();
        } catch (RuntimeException e) {
            sent = CompletableFuture.failedFuture(e);
        }
        sent.whenComplete(done);
    }

    /**
     * ListObjectsV2 over the bucket root ({@code model@} as the prefix when a model is named): S3's continuation token is the cursor
     * (one S3 refuses with 400 is the caller's bad token). Objects whose names are no LMCache key, or carry this server's
     * block-order tag, are left out, so a page may hold fewer than {@code pageSize} entries. Blocks the caller, bounded.
     */
    @Override
    public KeyPage listKeys(String model, int pageSize, String cursor) {
        ListObjectsV2Response reply;
        try {
            reply = client.listObjectsV2(b -> b.bucket(spec.bucket()).maxKeys(pageSize).prefix(model == null ? null : model + "@")
                    .continuationToken(cursor).overrideConfiguration(o -> o.apiCallTimeout(CONTROL_TIMEOUT)))
                    .get(CONTROL_TIMEOUT.toNanos() * 2, TimeUnit.NANOSECONDS);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException("interrupted while listing " + spec.bucket(), e);
        } catch (ExecutionException | TimeoutException e) {
            if (status(e) == 400) {
                throw new IllegalArgumentException("page_token is not one this adapter gave");
            }
            throw new IllegalStateException("ListObjectsV2 on " + spec.bucket() + " failed: " + unwrap(e), e);
        }
        List<KeyPage.Entry> entries = new ArrayList<>(reply.contents().size());
        for (S3Object object : reply.contents()) {
            L2Key key = L2Key.parseWireKey(object.key());
            if (key != null && key.layoutTag() == 0) {
                entries.add(new KeyPage.Entry(key, object.size()));
            }
        }
        return new KeyPage(entries, Boolean.TRUE.equals(reply.isTruncated()) ? reply.nextContinuationToken() : null);
    }

    /** LMCache's {@code report_status()} fields, then ours. */
    @Override
    public Map<String, Object> status() {
        Map<String, Object> status = new LinkedHashMap<>();
        boolean open = breakers.state(spec.endpoint()) != NodeBreakers.State.CLOSED;
        status.put("is_healthy", !open);
        status.put("type", typeName());
        status.put("endpoint", spec.endpoint());
        status.put("bucket", spec.bucket());
        status.put("region", spec.region());
        status.put("connection_failures", connectionFailures.sum());
        status.put("connection_disabled", open);
        status.put("current_size_bytes", ledger.usage().totalBytesUsed());
        status.put("max_capacity_bytes", spec.maxCapacityBytes());
        status.put("locked_keys", ledger.lockedKeys());
        status.put("values_in_flight", window.inFlight());
        status.put("values_waiting", window.waiting());
        status.put("stored_keys", storedKeys.sum());
        status.put("lookup_hits", lookupHits.sum());
        status.put("loaded_keys", loadedKeys.sum());
        status.put("load_misses", loadMisses.sum());
        status.put("failures", failures.total());
        status.put("failures_by_reason", failures.byReason());
        status.put("last_error", failures.lastError());
        status.putAll(eventCounts());
        status.put("breakers", breakers.status());
        return status;
    }

    /** Request, breaker and object-check counters (the server's metrics read these on each scrape); the names are fixed. */
    @Override
    public Map<String, Long> eventCounts() {
        Map<String, Long> counts = new LinkedHashMap<>(breakers.counters());
        counts.put("put_requests", puts.sum());
        counts.put("get_requests", gets.sum());
        counts.put("head_requests", heads.sum());
        counts.put("delete_requests", deletes.sum());
        counts.put("format_mismatch_size", sizeMismatches.sum());
        counts.put("load_short_body", shortBodies.sum());
        counts.put("lookup_forbidden", forbidden.sum());
        counts.put("connection_failures", connectionFailures.sum());
        return counts;
    }

    /** The breaker's state (tests). */
    NodeBreakers.State breakerState() {
        return breakers.state(spec.endpoint());
    }

    /**
     * Values still waiting fail at once; those in flight get {@link #CLOSE_WAIT_NS} to answer; then every buffer still lent goes
     * back (no copy touches L1 after this returns).
     */
    @Override
    public void drain() {
        window.close().forEach(Runnable::run);
        lent.drain(LOG, name, CLOSE_WAIT_NS);
    }

    @Override
    public void release() {
        client.close();
        scheduler.shutdownNow();
    }
}
