package io.lmcache.server.it;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.ObjectMapper;
import io.lmcache.server.testing.Http;
import io.lmcache.server.testing.JavaWorker;
import io.lmcache.server.testing.ServerExtension;
import io.lmcache.server.testing.ServerLogOnFailure;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.List;
import java.util.Random;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.junit.jupiter.api.extension.RegisterExtension;

/**
 * A REGISTER whose shared-memory name is a symbolic link in /dev/shm (issue 13, item 1): the link
 * is refused, never followed, so the file it points at is neither read into the cache by a STORE
 * nor overwritten by a RETRIEVE, and the refusal is counted. A REGISTER naming the server's own
 * pool file, by its name or a hard link (issue 31, item 2), is refused the same way: a tenant
 * cannot RETRIEVE over other tenants' objects in the pool; and the pool file is the owner's only.
 */
@ExtendWith(ServerLogOnFailure.class)
class ShmSegmentIT {
    @RegisterExtension
    static final ServerExtension SERVER = ServerExtension.withFlags("--l1-size-gb", "0.25");

    private static final JavaWorker.Geometry ONE_LAYER = new JavaWorker.Geometry(1, 32, 16, 2, 64);
    private static final int[] BLOCKS = JavaWorker.range(0, 16);
    private static final String MODEL = "shm-it/model";
    private static final ObjectMapper JSON = new ObjectMapper();

    private static double refused(String reason) {
        return Http.metric(SERVER.server(), "lmcache_mp_shm_segments_refused_total", "reason", reason);
    }

    @Test
    void aSymlinkedSegmentIsRefusedAndItsTargetNeitherReadNorChanged() throws Exception {
        byte[] victim = new byte[(int) ONE_LAYER.tensorBytes()];
        new Random(13).nextBytes(victim);
        Path target = Files.createTempFile("lmcache_it_victim_", "");
        try (JavaWorker honest = new JavaWorker(SERVER.endpoint(), 1300, MODEL, ONE_LAYER);
             JavaWorker attacker = new JavaWorker(SERVER.endpoint(), 1301, MODEL, ONE_LAYER)) {
            Files.write(target, victim);
            // a chunk in the cache that a followed link would let RETRIEVE write over the target
            int[] cached = JavaWorker.tokens(1300, 256);
            honest.register();
            honest.fill(BLOCKS, 1300);
            assertTrue(honest.store(cached, 0, 256, BLOCKS, "honest-store"), "the honest worker's STORE");

            Path segment = attacker.segments().getFirst();
            Files.delete(segment);
            Files.createSymbolicLink(segment, target);
            double symlinksBefore = refused("symlink");
            double failuresBefore = Http.metric(SERVER.server(), "lmcache_mp_registration_failures_total");
            attacker.register();
            assertEquals(symlinksBefore + 1, refused("symlink"), "the link is refused and counted");
            assertEquals(failuresBefore + 1, Http.metric(SERVER.server(), "lmcache_mp_registration_failures_total"));

            int[] fresh = JavaWorker.tokens(1301, 256);
            assertFalse(attacker.store(fresh, 0, 256, BLOCKS, "attacker-store"), "STORE through the refused registration");
            assertEquals(0, attacker.lookup(fresh, 256, "attacker-lookup", 1, 1), "nothing of the target reached the cache");
            attacker.endSession("attacker-lookup");
            assertFalse(attacker.retrieve(cached, 0, 256, BLOCKS, 0, "attacker-retrieve"), "RETRIEVE through the refused registration");

            assertTrue(Files.isSymbolicLink(segment), "the link itself is left in place");
            assertArrayEquals(victim, Files.readAllBytes(target), "the target is unchanged");
            assertTrue(SERVER.server().isAlive());
        } finally {
            Files.deleteIfExists(target);
        }
    }

    @Test
    void theServersPoolFileIsRefusedAsATensorAndTheVictimsBytesStay() throws Exception {
        String poolName = JSON.readTree(Http.get(SERVER.httpBase() + "/status").body()).at("/storage_manager/l1_manager/shm_name").asText();
        Path pool = Path.of("/dev/shm", poolName);
        assertTrue(Files.isRegularFile(pool), "the pool is in /dev/shm: " + poolName);
        assertEquals("rw-------", PosixFilePermissions.toString(Files.getPosixFilePermissions(pool)), "owner only by default");
        Path hardLink = Path.of("/dev/shm", "lmcache_it_pool_link_" + ProcessHandle.current().pid());
        try (JavaWorker victim = new JavaWorker(SERVER.endpoint(), 1310, MODEL, ONE_LAYER);
             JavaWorker attacker = new JavaWorker(SERVER.endpoint(), 1311, MODEL, ONE_LAYER)) {
            int[] tokens = JavaWorker.tokens(1310, 256);
            victim.register();
            victim.fill(BLOCKS, 1310);
            byte[] stored = victim.read(BLOCKS);
            assertTrue(victim.store(tokens, 0, 256, BLOCKS, "victim-store"));

            Files.createLink(hardLink, pool);
            double poolRefusals = refused("server_pool");
            double failuresBefore = Http.metric(SERVER.server(), "lmcache_mp_registration_failures_total");
            for (String name : new String[] {"/" + poolName, poolName, hardLink.getFileName().toString()}) {
                JavaWorker.register(attacker.client(), attacker.instanceId(), MODEL, ONE_LAYER, List.of(name));
                // the attack: the victim's chunk RETRIEVEd into the pool file's first bytes, over whatever objects live there
                assertFalse(attacker.retrieve(tokens, 0, 256, BLOCKS, 0, "attacker-retrieve"), "RETRIEVE into the pool through " + name);
                assertFalse(attacker.store(JavaWorker.tokens(1311, 256), 0, 256, BLOCKS, "attacker-store"), "STORE from the pool");
            }
            assertEquals(poolRefusals + 3, refused("server_pool"), "each name of the pool's inode is refused and counted");
            assertEquals(failuresBefore + 3, Http.metric(SERVER.server(), "lmcache_mp_registration_failures_total"));
            Files.delete(hardLink);

            assertEquals(1, victim.lookup(tokens, 256, "victim-lookup", 1, 1));
            victim.zero(JavaWorker.range(16, 16));
            assertTrue(victim.retrieve(tokens, 0, 256, JavaWorker.range(16, 16), 0, "victim-lookup"));
            assertArrayEquals(stored, victim.read(JavaWorker.range(16, 16)), "the victim's stored bytes are unchanged");
            victim.unregister();
            assertTrue(SERVER.server().isAlive());
        } finally {
            Files.deleteIfExists(hardLink);
        }
    }
}
