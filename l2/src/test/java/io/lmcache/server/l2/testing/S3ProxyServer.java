package io.lmcache.server.l2.testing;

import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.net.URI;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Comparator;
import java.util.concurrent.atomic.AtomicLong;
import java.util.stream.Stream;
import org.gaul.s3proxy.S3Proxy;
import org.gaul.s3proxy.auth.AuthenticationType;
import org.gaul.s3proxy.blobstore.ForwardingBlobStore;
import org.gaul.s3proxy.nio2blob.FilesystemNio2BlobStore;
import software.amazon.awssdk.services.s3.model.PutObjectRequest;
import software.amazon.awssdk.services.s3.model.PutObjectResponse;

/**
 * A real S3 server for the s3 adapter's tests: S3Proxy in this JVM on a free loopback port, its filesystem backend in a temporary
 * directory, SigV4 (and V2) signatures checked against one key pair, {@code <bucket>.localhost} virtual hosts served (docs/l2-s3.md
 * §7). Objects land as files {@code dir/<bucket>/<name>}, so a test can plant or read them as another server would; PUTs are
 * counted at the server.
 */
public final class S3ProxyServer implements AutoCloseable {
    public static final String IDENTITY = "lmcache-test";
    public static final String CREDENTIAL = "lmcache-test-secret";
    public static final String BUCKET = "lmcache-kv";

    private final Path dir;
    private final AtomicLong puts = new AtomicLong();
    private volatile S3Proxy proxy;
    private volatile int port;
    private volatile boolean stopped;

    private S3ProxyServer(Path dir, int port) throws Exception {
        this.dir = dir;
        Files.createDirectories(dir.resolve(BUCKET));
        listen(port);
    }

    private void listen(int wanted) throws Exception {
        ForwardingBlobStore store = new ForwardingBlobStore(new FilesystemNio2BlobStore(dir.toString())) {
            @Override
            public PutObjectResponse putBlob(PutObjectRequest request, InputStream body) {
                puts.incrementAndGet();
                return super.putBlob(request, body);
            }
        };
        S3Proxy started = S3Proxy.builder().blobStore(store).endpoint(URI.create("http://127.0.0.1:" + wanted))
                .awsAuthentication(AuthenticationType.AWS_V2_OR_V4, IDENTITY, CREDENTIAL).virtualHost("localhost").build();
        started.start();
        while (!"STARTED".equals(started.getState())) {
            Thread.sleep(5);
        }
        this.proxy = started;
        this.port = started.getPort();
        this.stopped = false;
    }

    /** Back on its port if a test stopped it (a server shared by a test class outlives one test's outage). */
    public void ensureRunning() {
        if (stopped) {
            restart();
        }
    }

    /** The end of an outage: the same port and files again. */
    public void restart() {
        try {
            listen(port);
        } catch (Exception e) {
            throw new IllegalStateException("S3Proxy did not start again on port " + port, e);
        }
    }

    /** A fresh server with an empty bucket {@link #BUCKET}. */
    public static S3ProxyServer start() {
        try {
            return new S3ProxyServer(Files.createTempDirectory("s3proxy-"), 0);
        } catch (Exception e) {
            throw new IllegalStateException("S3Proxy did not start", e);
        }
    }

    public int port() {
        return port;
    }

    /** PUTs the server took (objects written), since it started. */
    public long puts() {
        return puts.get();
    }

    /** Where the object of this name lies on disk. */
    public Path objectFile(String name) {
        return dir.resolve(BUCKET).resolve(name);
    }

    /** LMCache's JSON for this server (its fields only), with {@code extra} fields appended (",\"k\":v" or ""). */
    public String adapterJson(String extra) {
        return "{\"type\":\"s3\",\"s3_endpoint\":\"" + BUCKET + ".localhost:" + port + "\",\"s3_region\":\"us-east-1\",\"disable_tls\":true,"
                + "\"s3_prefer_http2\":false,\"aws_access_key_id\":\"" + IDENTITY + "\",\"aws_secret_access_key\":\"" + CREDENTIAL + "\""
                + extra + "}";
    }

    /** An outage: the port stops answering (connections refused); the files stay. */
    public void stop() {
        if (!stopped) {
            stopped = true;
            try {
                proxy.stop();
            } catch (Exception e) {
                throw new IllegalStateException(e);
            }
        }
    }

    @Override
    public void close() {
        stop();
        try (Stream<Path> files = Files.walk(dir)) {
            for (Path file : files.sorted(Comparator.reverseOrder()).toList()) {
                Files.deleteIfExists(file);
            }
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }
}
