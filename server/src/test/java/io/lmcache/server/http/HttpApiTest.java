package io.lmcache.server.http;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.EOFException;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.Socket;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import org.junit.jupiter.api.Test;

/** The dispatcher's handling of a request body its route left unread. */
class HttpApiTest {
    private static final HttpApi.Response REFUSED = HttpApi.Response.json(400, Map.of("detail", "refused unread"));

    /** Before the dispatcher swallowed what was left, 34 of these 300 got a reset connection instead of their 400. */
    @Test
    void aRefusalBeforeTheBodyIsReadReachesTheClient() throws Exception {
        try (HttpApi api = new HttpApi("127.0.0.1", 0);
                HttpClient client = HttpClient.newHttpClient()) {
            api.route("/refuse", (method, exchange) -> REFUSED);
            api.start();
            byte[] body = new byte[512 * 1024];
            int failed = 0;
            for (int i = 0; i < 300; i++) {
                HttpRequest request = HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + api.port() + "/refuse"))
                        .timeout(Duration.ofSeconds(10)).POST(HttpRequest.BodyPublishers.ofByteArray(body)).build();
                try {
                    HttpResponse<String> response = client.send(request, HttpResponse.BodyHandlers.ofString());
                    failed += response.statusCode() == 400 ? 0 : 1;
                } catch (IOException e) {
                    failed++;
                }
            }
            assertEquals(0, failed);
        }
    }

    @Test
    void aSwallowedBodyKeepsTheConnectionAndALargerOneEndsItWithoutWaitingForIt() throws Exception {
        try (HttpApi api = new HttpApi("127.0.0.1", 0)) {
            api.route("/refuse", (method, exchange) -> REFUSED);
            api.start();
            try (Socket socket = new Socket("127.0.0.1", api.port())) {
                socket.setSoTimeout(10_000);
                byte[] body = new byte[(int) HttpApi.MAX_SWALLOW_BYTES];
                send(socket, HttpApi.MAX_SWALLOW_BYTES, body);
                assertFalse(headers(socket).contains("connection: close"), "the body was read whole: the connection stays");
                // the same connection, reused: a body declared past the bound is answered at once, none of it sent
                send(socket, HttpApi.MAX_SWALLOW_BYTES + 1, new byte[0]);
                List<String> second = headers(socket);
                assertEquals("HTTP/1.1 400 Bad Request", second.getFirst().strip());
                assertTrue(second.contains("connection: close"), second.toString());
            }
        }
    }

    private static void send(Socket socket, long declared, byte[] body) throws IOException {
        OutputStream out = socket.getOutputStream();
        out.write(("POST /refuse HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: " + declared + "\r\n\r\n").getBytes(StandardCharsets.US_ASCII));
        out.write(body);
        out.flush();
    }

    /** A reply's status line and headers (lower case), its JSON body read past; byte by byte, so the next reply stays unread. */
    private static List<String> headers(Socket socket) throws IOException {
        InputStream in = socket.getInputStream();
        List<String> lines = new ArrayList<>();
        int length = 0;
        for (String line = line(in); !line.isEmpty(); line = line(in)) {
            String lower = line.toLowerCase(Locale.ROOT);
            lines.add(lines.isEmpty() ? line : lower);
            if (lower.startsWith("content-length:")) {
                length = Integer.parseInt(lower.substring("content-length:".length()).strip());
            }
        }
        assertEquals(length, in.readNBytes(length).length);
        return lines;
    }

    private static String line(InputStream in) throws IOException {
        StringBuilder line = new StringBuilder();
        for (int b = in.read(); b != '\n'; b = in.read()) {
            if (b < 0) {
                throw new EOFException("the connection ended after " + line);
            }
            line.append((char) b);
        }
        return line.toString().strip();
    }
}
