package io.lmcache.server.it;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.lmcache.server.testing.Http;
import io.lmcache.server.testing.JavaWorker;
import io.lmcache.server.testing.ServerLogOnFailure;
import io.lmcache.server.testing.ServerProcess;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.util.HashSet;
import java.util.Map;
import java.util.Set;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * Issue 45's tenant boundary on the real server: a cache salt is a tenant's secret, so no endpoint a peer reaches without the
 * admin token shows it ({@code /metrics} labels it by a keyed digest, {@code /status} counts tenants, {@code /quota} takes the
 * token also from loopback); admin routes refuse a {@code Host} that does not name the server (DNS rebinding);
 * {@code POST /quota} answers the tenant it set; salts without a quota share the default bucket; one tenant's read locks hold
 * at most {@code --tenant-read-lock-share} of the pool, the rest of its LOOKUP a counted miss.
 */
@ExtendWith(ServerLogOnFailure.class)
class TenantBoundaryIT {
    private static final int CHUNK = 256;
    /** 8 MiB chunk objects: a 256 MiB pool holds 32, a quarter of it 8. */
    private static final JavaWorker.Geometry GEOMETRY = new JavaWorker.Geometry(8, 32, 16, 8, 128);
    private static final int[] CHUNK_BLOCKS = JavaWorker.range(0, CHUNK / 16);
    private static final ObjectMapper JSON = new ObjectMapper();
    private static final String TOKEN = "tenant-boundary-token";
    private static final String[] AUTH = {"Authorization", "Bearer " + TOKEN};
    private static final String VICTIM = "victim-secret-salt-7f3a";
    private static final String HOG = "hog-secret-salt-19c2";

    private static int[] prefix(int i) {
        int[] tokens = JavaWorker.tokens(9000 + i, CHUNK);
        tokens[0] = i;
        return tokens;
    }

    @Test
    void saltsStaySecretQuotasNeedTheTokenAndNoTenantHoldsThePool() throws Exception {
        try (ServerProcess server = ServerProcess.start(Map.of(), "--l1-size-gb", "0.25", "--eviction-policy", "IsolatedLRU",
                "--http-admin-token", TOKEN, "--tenant-read-lock-share", "0.25");
             JavaWorker victim = new JavaWorker(server.endpoint(), 51, "tenant/model", GEOMETRY).salt(VICTIM);
             JavaWorker hog = new JavaWorker(server.endpoint(), 52, "tenant/model", GEOMETRY).salt(HOG)) {
            victim.register();
            hog.register();
            victim.fill(CHUNK_BLOCKS, 6);
            hog.fill(CHUNK_BLOCKS, 7);
            assertTrue(victim.store(prefix(0), 0, CHUNK, CHUNK_BLOCKS, "v-0"));
            assertEquals(1, victim.lookup(prefix(0), CHUNK, "v-look-0", 1, 0));

            // the hog locks 12 chunks with its LOOKUPs: a quarter of the pool (8) is its share, the other 4 are misses
            for (int i = 0; i < 12; i++) {
                assertTrue(hog.store(prefix(100 + i), 0, CHUNK, CHUNK_BLOCKS, "h-" + i));
            }
            int hogHits = 0;
            for (int i = 0; i < 12; i++) {
                hogHits += hog.lookup(prefix(100 + i), CHUNK, "h-look-" + i, 1, 1);
            }
            assertEquals(8, hogHits, "the hog's read locks stop at its share");
            assertEquals(4.0, Http.metric(server, "lmcache_mp_l1_read_share_miss_chunks_total"), "its other chunks missed, counted");
            for (int i = 1; i < 5; i++) {
                assertTrue(victim.store(prefix(i), 0, CHUNK, CHUNK_BLOCKS, "v-" + i));
                assertEquals(1, victim.lookup(prefix(i), CHUNK, "v-look-" + i, 1, 0), "the victim stores and finds chunk " + i);
            }

            // no endpoint without the token shows a salt
            String metrics = Http.get(server.httpBase() + "/metrics").body();
            String status = Http.get(server.httpBase() + "/status").body();
            var quotaNoToken = Http.get(server.httpBase() + "/quota");
            for (String salt : new String[] {VICTIM, HOG}) {
                assertFalse(metrics.contains(salt), "/metrics shows no salt");
                assertFalse(status.contains(salt), "/status shows no salt");
                assertFalse(quotaNoToken.body().contains(salt), "/quota without the token shows no salt");
            }
            assertTrue(metrics.matches("(?s).*lmcache_mp_lookup_hit_tokens_total\\{[^}]*cache_salt=\"s-[0-9a-f]{16}\".*"),
                    "the salt's series is labelled by its digest");
            assertEquals(401, quotaNoToken.statusCode(), "/quota takes the token, also from loopback");
            assertEquals(401, Http.post(server.httpBase() + "/quota", "{\"tenant\": \"" + VICTIM + "\", \"quota_bytes\": 0}").statusCode(),
                    "and so does setting a quota");
            JsonNode tenants = JSON.readTree(status).findValue("tenants");
            assertTrue(tenants != null && tenants.get("count").isInt(), "/status counts the tenants: " + tenants);

            // POST /quota answers the tenant it set, not the list
            JsonNode set = JSON.readTree(Http.post(server.httpBase() + "/quota", "{\"tenant\": \"" + VICTIM + "\", \"quota_bytes\": "
                    + (64 << 20) + "}", AUTH).body());
            assertEquals(VICTIM, set.get("tenant").get("tenant").asText(), set.toString());
            assertEquals(64 << 20, set.get("tenant").get("quota_bytes").asLong());
            assertFalse(set.has("tenants"), "no other tenant in the answer: " + set);

            // fresh salts, one per STORE, are one bucket: /quota lists the configured tenant and _default only
            JavaWorker fresh = hog;
            for (int i = 0; i < 3; i++) {
                assertTrue(fresh.salt("fresh-salt-" + i).store(prefix(200 + i), 0, CHUNK, CHUNK_BLOCKS, "f-" + i));
            }
            Set<String> names = new HashSet<>();
            for (JsonNode line : JSON.readTree(Http.get(server.httpBase() + "/quota", AUTH).body()).get("tenants")) {
                names.add(line.get("tenant").asText());
            }
            assertEquals(Set.of("_default", VICTIM), names, "no tenant entry per fresh salt");

            // admin routes refuse a Host that does not name the server (a DNS-rebinding page sends its own, and no token)
            int port = server.httpPort();
            assertEquals(421, rawStatus(port, "GET /quota", "evil.example:" + port, "", null), "a foreign Host without the token");
            assertEquals(421, rawStatus(port, "POST /cache/clear", "rebind.attacker.test", "", null), "on every admin route");
            assertEquals(401, rawStatus(port, "GET /quota", "127.0.0.1:" + port, "", null), "an address literal is this server");
            assertEquals(200, rawStatus(port, "GET /quota", "localhost:" + port, "", TOKEN));
            assertEquals(200, rawStatus(port, "GET /quota", "lmcache-server.default.svc:" + port, "", TOKEN),
                    "with the token any name of the server (a Kubernetes service) is fine: a rebinding page cannot know it");
            assertEquals(200, rawStatus(port, "GET /metrics", "evil.example", "", null), "/metrics is no admin route");
            assertEquals(2.0, Http.metric(server, "lmcache_mp_http_refused_total", "reason", "wrong_host"));
        }
    }

    /** The status code of {@code requestLine} sent with {@code Host: host} and {@code token} when not null (a raw socket: the JDK client sets Host). */
    private static int rawStatus(int port, String requestLine, String host, String body, String token) throws IOException {
        try (Socket socket = new Socket("127.0.0.1", port)) {
            OutputStream out = socket.getOutputStream();
            String auth = token == null ? "" : "Authorization: Bearer " + token + "\r\n";
            String request = requestLine + " HTTP/1.1\r\nHost: " + host + "\r\n" + auth + "Content-Length: "
                    + body.length() + "\r\nConnection: close\r\n\r\n" + body;
            out.write(request.getBytes(StandardCharsets.US_ASCII));
            out.flush();
            InputStream in = socket.getInputStream();
            String statusLine = new String(in.readNBytes(12), StandardCharsets.US_ASCII);
            return Integer.parseInt(statusLine.substring(9, 12));
        }
    }
}
