package io.lmcache.server.protocol.testing;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import java.util.stream.Stream;

/**
 * The golden frames captured from LMCache's own client ({@code testdata/golden/*.jsonl}): one
 * message a line, {@code dir} c2s (what the client sent) or s2c (a reply it accepted), frames as
 * the DEALER sees them.
 */
public final class Golden {
    private static final ObjectMapper JSON = new ObjectMapper();

    /** One captured message. {@code frames} are {@code [uid, op, payload...]}. */
    public record Message(String file, int line, String dir, String op, String identityHex, byte[][] frames) {
        public boolean clientToServer() {
            return dir.equals("c2s");
        }

        public byte[] uid() {
            return frames[0];
        }

        public byte[] payload(int index) {
            return frames[2 + index];
        }

        public int payloadCount() {
            return frames.length - 2;
        }

        @Override
        public String toString() {
            return file + ":" + line + " " + dir + " " + op;
        }
    }

    private Golden() {}

    /** The golden folder: {@code -Dlmcache.golden.dir}, else {@code <repo>/testdata/golden}; fails loudly when absent. */
    public static Path dir() {
        String explicit = System.getProperty("lmcache.golden.dir");
        Path path;
        if (explicit != null) {
            path = Path.of(explicit);
        } else {
            path = repoRoot().resolve("testdata/golden");
        }
        if (!Files.isDirectory(path)) {
            throw new IllegalStateException("golden frames not found at " + path.toAbsolutePath()
                    + " (they live in the repository under testdata/golden)");
        }
        return path;
    }

    public static Path repoRoot() {
        String root = System.getProperty("lmcache.repo.root");
        if (root != null) {
            return Path.of(root);
        }
        Path here = Path.of("").toAbsolutePath();
        while (here != null && !Files.isDirectory(here.resolve("testdata"))) {
            here = here.getParent();
        }
        if (here == null) {
            throw new IllegalStateException("cannot find the repository root (a folder with testdata/) above " + Path.of("").toAbsolutePath());
        }
        return here;
    }

    public static List<String> files() {
        try (Stream<Path> paths = Files.list(dir())) {
            return paths.map(p -> p.getFileName().toString()).filter(n -> n.endsWith(".jsonl")).sorted().toList();
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    public static List<Message> load(String file) {
        List<Message> messages = new ArrayList<>();
        try {
            List<String> lines = Files.readAllLines(dir().resolve(file));
            for (int i = 0; i < lines.size(); i++) {
                if (lines.get(i).isBlank()) {
                    continue;
                }
                JsonNode node = JSON.readTree(lines.get(i));
                JsonNode hex = node.get("frames_hex");
                byte[][] frames = new byte[hex.size()][];
                for (int f = 0; f < frames.length; f++) {
                    frames[f] = HexFormat.of().parseHex(hex.get(f).asText());
                }
                messages.add(new Message(file, i + 1, node.get("dir").asText(), node.get("op").asText(),
                        node.path("identity_hex").asText(""), frames));
            }
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
        return messages;
    }

    public static List<Message> loadAll() {
        List<Message> all = new ArrayList<>();
        for (String file : files()) {
            all.addAll(load(file));
        }
        return all;
    }
}
