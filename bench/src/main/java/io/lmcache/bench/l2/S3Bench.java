package io.lmcache.bench.l2;

import io.lmcache.bench.Machine;
import io.lmcache.server.l2.Bitmap;
import io.lmcache.server.l2.L2Adapter;
import io.lmcache.server.l2.L2AdapterSpecs;
import io.lmcache.server.l2.L2Adapters;
import io.lmcache.server.l2.L2Hash;
import io.lmcache.server.l2.L2Key;
import io.lmcache.server.l2.StoreResult;
import io.lmcache.server.l2.testing.S3ProxyServer;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.net.URI;
import java.nio.ByteBuffer;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.HexFormat;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Random;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.LockSupport;
import java.util.function.Supplier;
import software.amazon.awssdk.auth.credentials.AwsBasicCredentials;
import software.amazon.awssdk.auth.credentials.StaticCredentialsProvider;
import software.amazon.awssdk.core.async.AsyncRequestBody;
import software.amazon.awssdk.core.async.AsyncResponseTransformer;
import software.amazon.awssdk.core.checksums.RequestChecksumCalculation;
import software.amazon.awssdk.core.checksums.ResponseChecksumValidation;
import software.amazon.awssdk.http.nio.netty.NettyNioAsyncHttpClient;
import software.amazon.awssdk.regions.Region;
import software.amazon.awssdk.services.s3.S3AsyncClient;

/**
 * The s3 adapter against S3Proxy on loopback (issue 50, Build 4a), next to the AWS SDK alone (the same {@code S3AsyncClient}
 * over Netty, path-style at {@code localhost}, the same checksum settings) moving the same objects in the same run: PUT all,
 * then GET all, rounds alternating adapter and SDK, each a fresh set of names. Writes the figures as markdown to {@code --out}.
 *
 * <p>{@code bench/run-s3.sh [--objects 16] [--object-mib 16] [--rounds 5] [--out bench/results/.../s3.md]}
 */
public final class S3Bench {
    private static final long WAIT_NS = TimeUnit.SECONDS.toNanos(300);

    private S3Bench() {}

    public static void main(String[] args) throws Exception {
        Map<String, String> options = new HashMap<>();
        for (int i = 0; i + 1 < args.length; i += 2) {
            options.put(args[i].replaceFirst("^--", ""), args[i + 1]);
        }
        int objects = Integer.parseInt(options.getOrDefault("objects", "16"));
        int objectBytes = Integer.parseInt(options.getOrDefault("object-mib", "16")) << 20;
        int rounds = Integer.parseInt(options.getOrDefault("rounds", "5"));
        Path out = Path.of(options.getOrDefault("out", "s3-bench.md"));
        String loadBefore = Machine.loadAverages();
        String machine = Machine.describe();
        byte[] value = new byte[objectBytes];
        new Random(1).nextBytes(value);
        List<double[]> adapterRates = new ArrayList<>();
        List<double[]> sdkRates = new ArrayList<>();
        List<double[]> crtRates = new ArrayList<>();
        try (S3ProxyServer server = S3ProxyServer.start(); Arena arena = Arena.ofShared()) {
            L2Adapter adapter = L2Adapters.create(L2AdapterSpecs.parse(server.adapterJson(""), Map.of()),
                    Thread.ofPlatform().daemon().name("bench-s3-", 0).factory());
            S3AsyncClient sdk = sdk(server.port());
            S3AsyncClient crt = crt(server.port());
            List<MemorySegment> segments = new ArrayList<>();
            List<MemorySegment> targets = new ArrayList<>();
            for (int i = 0; i < objects; i++) {
                segments.add(arena.allocate(objectBytes, 4096).copyFrom(MemorySegment.ofArray(value)));
                targets.add(arena.allocate(objectBytes, 4096));
            }
            roundOfAdapter(adapter, segments, targets, -1, objectBytes); // warm-up: connections, JIT
            roundOfSdk(sdk, value, objects, -1, "sdk");
            roundOfSdk(crt, value, objects, -1, "crt");
            for (int round = 0; round < rounds; round++) {
                adapterRates.add(roundOfAdapter(adapter, segments, targets, round, objectBytes));
                sdkRates.add(roundOfSdk(sdk, value, objects, round, "sdk"));
                crtRates.add(roundOfSdk(crt, value, objects, round, "crt"));
            }
            sdk.close();
            crt.close();
            adapter.close();
        }
        String md = markdown(objects, objectBytes, rounds, List.of(adapterRates, sdkRates, crtRates), machine, loadBefore);
        Files.writeString(out, md);
        System.out.println(md);
    }

    private static S3AsyncClient sdk(int port) {
        return S3AsyncClient.builder()
                .httpClient(NettyNioAsyncHttpClient.builder().maxConcurrency(128).build())
                .region(Region.US_EAST_1)
                .endpointOverride(URI.create("http://localhost:" + port))
                .forcePathStyle(true)
                .credentialsProvider(StaticCredentialsProvider.create(AwsBasicCredentials.create(S3ProxyServer.IDENTITY,
                        S3ProxyServer.CREDENTIAL)))
                .requestChecksumCalculation(RequestChecksumCalculation.WHEN_REQUIRED)
                .responseChecksumValidation(ResponseChecksumValidation.WHEN_REQUIRED)
                .build();
    }

    /** The SDK's CRT-based client (LMCache's Python adapter uses the CRT too), checksums off as for the others. */
    private static S3AsyncClient crt(int port) {
        return S3AsyncClient.crtBuilder()
                .region(Region.US_EAST_1)
                .endpointOverride(URI.create("http://localhost:" + port))
                .forcePathStyle(true)
                .credentialsProvider(StaticCredentialsProvider.create(AwsBasicCredentials.create(S3ProxyServer.IDENTITY,
                        S3ProxyServer.CREDENTIAL)))
                .requestChecksumCalculation(RequestChecksumCalculation.WHEN_REQUIRED)
                .responseChecksumValidation(ResponseChecksumValidation.WHEN_REQUIRED)
                .maxConcurrency(64)
                // one PUT and one GET per object, as the others: S3Proxy 4.1.0 answers the CRT's multipart upload with a body
                // the CRT cannot read ("Upload Id not found in create-multipart-upload response")
                .thresholdInBytes(1L << 30)
                .minimumPartSizeInBytes(1L << 30)
                .build();
    }

    private static L2Key key(String set, int round, int i) {
        byte[] hash = new byte[32];
        new Random(Arrays.hashCode(new int[] {set.hashCode(), round, i})).nextBytes(hash);
        return L2Key.of("bench/s3-model", L2Key.packKvRank(1, 0), 0, L2Hash.parse(HexFormat.of().formatHex(hash)), "");
    }

    /** {write GB/s, load GB/s} of the adapter: one store task of every object, then one lookup and one load task. */
    private static double[] roundOfAdapter(L2Adapter adapter, List<MemorySegment> segments, List<MemorySegment> targets, int round,
            long objectBytes) {
        List<L2Key> keys = new ArrayList<>();
        for (int i = 0; i < segments.size(); i++) {
            keys.add(key("adapter", round, i));
        }
        long bytes = objectBytes * segments.size();
        long start = System.nanoTime();
        long task = adapter.submitStore(keys, segments);
        StoreResult result = awaitStore(adapter, task);
        double write = bytes / 1e9 / ((System.nanoTime() - start) / 1e9);
        if (!result.ok()) {
            throw new IllegalStateException("the adapter's store failed");
        }
        long lookup = adapter.submitLookupAndLock(keys, Map.of(0, objectBytes));
        Bitmap found = await(() -> adapter.queryLookupAndLock(lookup));
        if (found.popcount() != keys.size()) {
            throw new IllegalStateException("the adapter found " + found.popcount() + " of " + keys.size());
        }
        start = System.nanoTime();
        long load = adapter.submitLoad(keys, targets);
        Bitmap loaded = await(() -> adapter.queryLoad(load));
        double read = bytes / 1e9 / ((System.nanoTime() - start) / 1e9);
        adapter.submitUnlock(keys);
        if (loaded.popcount() != keys.size() || !targets.getFirst().asByteBuffer().equals(segments.getFirst().asByteBuffer())) {
            throw new IllegalStateException("the adapter loaded " + loaded.popcount() + " of " + keys.size() + " or other bytes");
        }
        return new double[] {write, read};
    }

    /** {write GB/s, load GB/s} of the SDK alone: every PUT sent, then awaited; then every GET. */
    private static double[] roundOfSdk(S3AsyncClient sdk, byte[] value, int objects, int round, String set) {
        List<String> names = new ArrayList<>();
        for (int i = 0; i < objects; i++) {
            names.add(key(set, round, i).wireKey());
        }
        long bytes = (long) value.length * objects;
        long start = System.nanoTime();
        List<CompletableFuture<?>> puts = new ArrayList<>();
        for (String name : names) {
            puts.add(sdk.putObject(b -> b.bucket(S3ProxyServer.BUCKET).key(name).contentLength((long) value.length)
                    .contentType("application/octet-stream"), AsyncRequestBody.fromByteBufferUnsafe(ByteBuffer.wrap(value))));
        }
        CompletableFuture.allOf(puts.toArray(CompletableFuture[]::new)).join();
        double write = bytes / 1e9 / ((System.nanoTime() - start) / 1e9);
        start = System.nanoTime();
        List<CompletableFuture<?>> gets = new ArrayList<>();
        for (String name : names) {
            gets.add(sdk.getObject(b -> b.bucket(S3ProxyServer.BUCKET).key(name), AsyncResponseTransformer.toBytes()));
        }
        CompletableFuture.allOf(gets.toArray(CompletableFuture[]::new)).join();
        double read = bytes / 1e9 / ((System.nanoTime() - start) / 1e9);
        return new double[] {write, read};
    }

    private static StoreResult awaitStore(L2Adapter adapter, long task) {
        long deadline = System.nanoTime() + WAIT_NS;
        while (System.nanoTime() - deadline < 0) {
            StoreResult result = adapter.popCompletedStores().get(task);
            if (result != null) {
                return result;
            }
            LockSupport.parkNanos(100_000);
        }
        throw new IllegalStateException("the adapter's store did not finish");
    }

    private static Bitmap await(Supplier<Bitmap> query) {
        long deadline = System.nanoTime() + WAIT_NS;
        while (System.nanoTime() - deadline < 0) {
            Bitmap bitmap = query.get();
            if (bitmap != null) {
                return bitmap;
            }
            LockSupport.parkNanos(100_000);
        }
        throw new IllegalStateException("the adapter's task did not finish");
    }

    private static double median(List<double[]> rates, int column) {
        double[] values = rates.stream().mapToDouble(r -> r[column]).sorted().toArray();
        return values[values.length / 2];
    }

    private static String markdown(int objects, int objectBytes, int rounds, List<List<double[]>> rates, String machine,
            String loadBefore) {
        List<double[]> adapter = rates.get(0);
        List<double[]> sdk = rates.get(1);
        List<double[]> crt = rates.get(2);
        StringBuilder md = new StringBuilder();
        md.append("### L2: the s3 adapter against S3Proxy on loopback\n\n");
        md.append("Command: `bench/run-s3.sh --objects ").append(objects).append(" --object-mib ").append(objectBytes >> 20)
                .append(" --rounds ").append(rounds).append("`  \nSources: commit ").append(Machine.source()).append("  \nMachine: ")
                .append(machine).append(", ").append(Machine.now()).append("  \nLoad averages before: ").append(loadBefore).append("\n\n");
        md.append(String.format(Locale.ROOT, "%d objects of %d MiB per round, %d rounds alternating (median shown); S3Proxy 4.1.0 in "
                + "this JVM (filesystem backend, SigV4 checked); the adapter (`S3AsyncClient` over Netty, streamed from off-heap "
                + "segments), the SDK alone with the same Netty client and with the CRT-based client (`S3AsyncClient.crtBuilder()`, "
                + "aws-crt 0.50.0), all PUTs then all GETs in flight, byte[] values, in the same run.%n%n", objects, objectBytes >> 20,
                rounds));
        md.append("| figure | s3 adapter | SDK alone (Netty) | adapter / SDK | SDK alone (CRT) | CRT / Netty |\n|---|---:|---:|---:|---:|---:|\n");
        for (int column = 0; column < 2; column++) {
            md.append(String.format(Locale.ROOT, "| %s, GB/s | %.3f | %.3f | %.2f | %.3f | %.2f |%n", column == 0 ? "write (PUT)" : "load (GET)",
                    median(adapter, column), median(sdk, column), median(adapter, column) / median(sdk, column), median(crt, column),
                    median(crt, column) / median(sdk, column)));
        }
        md.append("\nEvery round (adapter write, load; Netty SDK write, load; CRT SDK write, load), GB/s:\n\n");
        for (int i = 0; i < adapter.size(); i++) {
            md.append(String.format(Locale.ROOT, "- %.3f, %.3f; %.3f, %.3f; %.3f, %.3f%n", adapter.get(i)[0], adapter.get(i)[1],
                    sdk.get(i)[0], sdk.get(i)[1], crt.get(i)[0], crt.get(i)[1]));
        }
        return md.toString();
    }
}
