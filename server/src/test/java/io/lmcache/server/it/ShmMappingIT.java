package io.lmcache.server.it;

import static org.awaitility.Awaitility.await;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.lmcache.server.protocol.WireField;
import io.lmcache.server.testing.Http;
import io.lmcache.server.testing.JavaWorker;
import io.lmcache.server.testing.ServerExtension;
import io.lmcache.server.testing.ServerLogOnFailure;
import io.lmcache.server.testing.ServerProcess;
import io.lmcache.server.testing.TestClient;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.junit.jupiter.api.extension.RegisterExtension;

/**
 * Mappings of CPU workers' segments are a budgeted resource (issue 31, item 1): the red team's
 * REGISTERs of 33 000 wrappers at one /dev/shm file, and of thousands of segments under many
 * instance ids, took the JVM past {@code vm.max_map_count} and aborted it. Now one file is mapped
 * once however many wrappers, names and instances use it, and a REGISTER over the caps is refused
 * whole and counted while the server and earlier registrations carry on.
 */
@ExtendWith(ServerLogOnFailure.class)
class ShmMappingIT {
    /** Per REGISTER a quarter: 3 250 distinct segments. */
    private static final int MAX_SEGMENTS = 13_000;
    @RegisterExtension
    static final ServerExtension SERVER = ServerExtension.withFlags("--l1-size-gb", "0.25", "--chunk-size", "16",
            "--shm-max-segments", Integer.toString(MAX_SEGMENTS));

    /** 8 KiB tensors (16 blocks of one 256-byte piece): thousands of layers still make a chunk object that fits a region. */
    private static final JavaWorker.Geometry TINY = new JavaWorker.Geometry(1, 16, 16, 1, 8);
    private static final JavaWorker.Geometry ONE_LAYER = new JavaWorker.Geometry(1, 32, 16, 2, 64);
    private static final String MODEL = "shm-mapping-it/model";
    private static final ObjectMapper JSON = new ObjectMapper();

    private final List<Path> files = new ArrayList<>();

    @AfterEach
    void removeFiles() throws IOException {
        for (Path file : files) {
            Files.deleteIfExists(file);
        }
    }

    /** A sparse segment of {@code bytes} in /dev/shm, removed after the test. */
    private Path segment(String tag, long bytes) {
        Path path = Path.of("/dev/shm", "lmcache_mapit_" + ProcessHandle.current().pid() + "_" + tag);
        try (FileChannel channel = FileChannel.open(path, StandardOpenOption.CREATE_NEW, StandardOpenOption.WRITE)) {
            files.add(path);
            channel.write(ByteBuffer.wrap(new byte[1]), bytes - 1);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
        return path;
    }

    private List<String> batch(String tag, int count) {
        List<String> names = new ArrayList<>(count);
        for (int i = 0; i < count; i++) {
            names.add("/" + segment(tag + i, TINY.tensorBytes()).getFileName());
        }
        return names;
    }

    private static JsonNode mappings(ServerProcess server) throws IOException {
        return JSON.readTree(Http.get(server.httpBase() + "/status").body()).get("shm_mappings");
    }

    private static int mappedSegments(ServerProcess server) {
        try {
            return mappings(server).get("segments").asInt();
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    /** Lines of the server's /proc/PID/maps that map {@code file}. */
    private static long mapsOf(ServerProcess server, Path file) {
        try {
            return Files.readAllLines(Path.of("/proc/" + server.pid() + "/maps")).stream().filter(line -> line.endsWith(" " + file)).count();
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    private static double refused(String reason) {
        return Http.metric(SERVER.server(), "lmcache_mp_shm_segments_refused_total", "reason", reason);
    }

    private static double failedRegistrations() {
        return Http.metric(SERVER.server(), "lmcache_mp_registration_failures_total");
    }

    private static void unregister(JavaWorker from, long instanceId) {
        from.client().call(2, TestClient.pack(p -> p.packLong(instanceId)));
    }

    private static void awaitMapped(ServerProcess server, int segments, String why) {
        await(why).atMost(Duration.ofSeconds(30)).pollInterval(Duration.ofMillis(50)).until(() -> mappedSegments(server) == segments);
    }

    @Test
    void thousandsOfWrappersAtOneFileMapItOnceAcrossRegistrations() throws Exception {
        ServerProcess server = SERVER.server();
        Path file = segment("one", TINY.tensorBytes());
        String name = file.getFileName().toString();
        // as many wrappers as one REGISTER may carry (the wire limit), half naming the file with a leading slash
        int half = WireField.MAX_LAYERS / 2;
        List<String> names = new ArrayList<>(Collections.nCopies(half, "/" + name));
        names.addAll(Collections.nCopies(half, name));
        int before = mappedSegments(server);
        double failuresBefore = failedRegistrations();
        try (JavaWorker attacker = new JavaWorker(server.endpoint(), 3100, MODEL, TINY)) {
            // the red team's second such REGISTER took the JVM past vm.max_map_count
            for (long id = 3100; id < 3103; id++) {
                JavaWorker.register(attacker.client(), id, MODEL, TINY, names);
            }
            assertEquals(failuresBefore, failedRegistrations(), "the three registrations are accepted");
            assertEquals(before + 1, mappedSegments(server), "one mapping for three registrations' wrappers");
            assertEquals(1, mapsOf(server, file), "the server's address space maps the file once");
            assertTrue(attacker.store(JavaWorker.tokens(31, 16), 0, 16, new int[] {0}, "one-file-store"), "every layer served");
            assertTrue(attacker.retrieve(JavaWorker.tokens(31, 16), 0, 16, new int[] {1}, 0, "one-file-retrieve"));
            attacker.unregister();
            assertEquals(1, mapsOf(server, file), "still used by the other instances");
            assertEquals(before + 1, mappedSegments(server));
            unregister(attacker, 3101);
            unregister(attacker, 3102);
        }
        awaitMapped(server, before, "the last user unregistered: unmapped");
        assertEquals(0, mapsOf(server, file));
        assertTrue(server.isAlive());
    }

    @Test
    void thousandsOfSegmentsUnderManyInstancesAreRefusedOverTheCapAndTheRestServes() throws Exception {
        ServerProcess server = SERVER.server();
        JsonNode caps = mappings(server);
        assertEquals(MAX_SEGMENTS, caps.get("max_segments").asInt(), "the cap is in /status");
        assertEquals(MAX_SEGMENTS / 4, caps.get("max_segments_per_register").asInt());
        assertTrue(caps.get("vm_max_map_count").asLong() >= 2L * MAX_SEGMENTS, "the cap is under the kernel's limit");
        List<Long> ids = new ArrayList<>();
        try (JavaWorker victim = new JavaWorker(server.endpoint(), 3299, MODEL, ONE_LAYER);
             JavaWorker attacker = new JavaWorker(server.endpoint(), 3200, MODEL, TINY)) {
            victim.register();
            victim.fill(JavaWorker.range(0, 16), 3299);
            byte[] stored = victim.read(JavaWorker.range(0, 16));
            int[] tokens = JavaWorker.tokens(3299, 256);
            assertTrue(victim.store(tokens, 0, 256, JavaWorker.range(0, 16), "victim-store"));
            int before = mappedSegments(server);
            double failuresBefore = failedRegistrations();

            // the red team's attack: the same 3 000 segments under one new instance id after another
            List<String> shared = batch("shared", 3000);
            for (long id = 3200; id < 3225; id++) {
                JavaWorker.register(attacker.client(), id, MODEL, TINY, shared);
                ids.add(id);
            }
            assertEquals(failuresBefore, failedRegistrations(), "25 registrations of one set of segments are accepted");
            assertEquals(before + 3000, mappedSegments(server), "mapped once, whatever the number of instances");

            // three more sets of 3 000 fit under the cap of 13 000; the next set does not
            for (long id = 3230; id < 3233; id++) {
                JavaWorker.register(attacker.client(), id, MODEL, TINY, batch("set" + id + "_", 3000));
                ids.add(id);
            }
            int full = mappedSegments(server);
            assertEquals(before + 12_000, full);
            assertEquals(failuresBefore, failedRegistrations());
            double overServer = refused("server_segment_cap");
            List<String> over = batch("over", 3000);
            JavaWorker.register(attacker.client(), 3240, MODEL, TINY, over);
            assertEquals(overServer + 1, refused("server_segment_cap"), "refused over the server's cap, counted");
            assertEquals(failuresBefore + 1, failedRegistrations());
            awaitMapped(server, full, "nothing half-registered: what the refused REGISTER mapped is unmapped");
            assertEquals(0, mapsOf(server, Path.of("/dev/shm", over.getFirst().substring(1))));

            // over the per-REGISTER cap: refused before any name is opened (these do not even exist)
            double overRegister = refused("register_segment_cap");
            List<String> missing = new ArrayList<>();
            for (int i = 0; i <= MAX_SEGMENTS / 4; i++) {
                missing.add("lmcache_mapit_absent_" + i);
            }
            double missingBefore = refused("missing");
            JavaWorker.register(attacker.client(), 3241, MODEL, TINY, missing);
            assertEquals(overRegister + 1, refused("register_segment_cap"));
            assertEquals(missingBefore, refused("missing"), "refused whole, before any open");

            assertTrue(server.isAlive());
            assertTrue(attacker.store(JavaWorker.tokens(3200, 16), 0, 16, new int[] {0}, "intact-store"), "earlier registrations serve");
            assertTrue(attacker.retrieve(JavaWorker.tokens(3200, 16), 0, 16, new int[] {1}, 0, "intact-retrieve"));
            assertTrue(victim.store(JavaWorker.tokens(3298, 256), 0, 256, JavaWorker.range(0, 16), "victim-store-2"));
            assertEquals(16, victim.lookup(tokens, 256, "victim-lookup", 1, 1));
            victim.zero(JavaWorker.range(16, 16));
            assertTrue(victim.retrieve(tokens, 0, 256, JavaWorker.range(16, 16), 0, "victim-lookup"));
            assertArrayEquals(stored, victim.read(JavaWorker.range(16, 16)), "the victim's bytes come back exact");

            for (long id : ids) {
                unregister(attacker, id);
            }
            victim.unregister();
            awaitMapped(server, before - 1, "every instance unregistered: the segments are unmapped");
        }
    }

    @Test
    void aReapedInstanceLetsGoOfItsUseOfASharedSegment() throws Exception {
        Path file = segment("reaped", TINY.tensorBytes());
        List<String> names = List.of("/" + file.getFileName(), "/" + file.getFileName());
        try (ServerProcess server = ServerProcess.start(Map.of(), "--l1-size-gb", "0.25", "--chunk-size", "16",
                "--test-liveness-floor-seconds", "1", "--worker-reap-timeout-seconds", "2", "--worker-registration-grace-seconds", "4",
                "--worker-disconnect-grace-seconds", "2");
             JavaWorker silent = new JavaWorker(server.endpoint(), 3400, MODEL, TINY);
             JavaWorker live = new JavaWorker(server.endpoint(), 3401, MODEL, TINY)) {
            JavaWorker.register(silent.client(), 3400, MODEL, TINY, names);
            JavaWorker.register(live.client(), 3401, MODEL, TINY, names);
            assertEquals(1, mappedSegments(server), "two instances, one mapping");
            assertTrue(silent.ping(), "pinged once, then silent: reaped after the timeout");
            AtomicBoolean running = new AtomicBoolean(true);
            AtomicInteger pings = new AtomicInteger();
            Thread pinger = new Thread(() -> {
                while (running.get() && live.ping()) {
                    pings.incrementAndGet();
                    await().pollDelay(Duration.ofMillis(200)).until(() -> true);
                }
            });
            pinger.start();
            try {
                await("the silent instance reaped").atMost(Duration.ofSeconds(30)).pollInterval(Duration.ofMillis(100))
                        .until(() -> Http.metric(server, "lmcache_mp_reaped_workers_total") == 1);
            } finally {
                running.set(false);
                pinger.join(10_000);
            }
            assertTrue(pings.get() > 0);
            assertEquals(1, mappedSegments(server), "the live instance still uses the segment");
            assertEquals(1, mapsOf(server, file));
            assertTrue(live.store(JavaWorker.tokens(34, 16), 0, 16, new int[] {0}, "after-reap"), "and still serves from it");
            live.unregister();
            awaitMapped(server, 0, "the last user gone: unmapped");
            assertEquals(0, mapsOf(server, file));
        }
    }
}
