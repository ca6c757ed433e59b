package io.lmcache.server.config;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/** {@code --hash-algorithm}: LMCache's two shareable chains, the seed sha256_cbor needs, and the refusals. */
class HashAlgorithmTest {

    private static ConfigLoader.Outcome load(Map<String, String> env, String... args) {
        return ConfigLoader.load(args, env, MemoryLimits.unlimited());
    }

    private static HashAlgorithm algorithm(Map<String, String> env, String... args) {
        ConfigLoader.Outcome outcome = load(env, args);
        return assertInstanceOf(ConfigLoader.Outcome.Run.class, outcome, outcome::toString).config().hashAlgorithm();
    }

    private static String refusal(Map<String, String> env, String... args) {
        ConfigLoader.Outcome outcome = load(env, args);
        ConfigLoader.Outcome.Exit exit = assertInstanceOf(ConfigLoader.Outcome.Exit.class, outcome, outcome::toString);
        assertEquals(ConfigLoader.EXIT_USAGE, exit.code());
        assertEquals(1, exit.text().strip().lines().count(), exit.text());
        return exit.text();
    }

    @Test
    void blake3IsTheDefaultAndShownInConfig() {
        ConfigLoader.Outcome outcome = load(Map.of(), "--l1-size-gb", "1");
        ServerConfig config = assertInstanceOf(ConfigLoader.Outcome.Run.class, outcome, outcome::toString).config();
        assertEquals(new HashAlgorithm.Blake3(), config.hashAlgorithm());
        assertEquals("blake3", config.describe().get("hash_algorithm"));
        assertEquals(new HashAlgorithm.Blake3(), algorithm(Map.of("PYTHONHASHSEED", "7"), "--l1-size-gb", "1", "--hash-algorithm", "blake3"),
                "the seed plays no part in blake3");
    }

    @Test
    void sha256CborTakesTheSeedVerbatim() {
        assertEquals(new HashAlgorithm.Sha256Cbor("0"), algorithm(Map.of("PYTHONHASHSEED", "0"), "--l1-size-gb", "1",
                "--hash-algorithm", "sha256_cbor"));
        // os.getenv gives vLLM the string as it is, blanks included: so does this server
        assertEquals(new HashAlgorithm.Sha256Cbor(" 12 "), algorithm(Map.of("PYTHONHASHSEED", " 12 "), "--l1-size-gb", "1",
                "--hash-algorithm", "sha256_cbor"));
        assertEquals(new HashAlgorithm.Sha256Cbor(""), algorithm(Map.of("PYTHONHASHSEED", ""), "--l1-size-gb", "1",
                "--hash-algorithm", "sha256_cbor"), "set but empty is not unset for os.getenv");
    }

    @Test
    void sha256CborWithoutTheSeedIsRefused() {
        String text = refusal(Map.of(), "--l1-size-gb", "1", "--hash-algorithm", "sha256_cbor");
        assertTrue(text.startsWith("lmcache-server: error: --hash-algorithm: sha256_cbor needs PYTHONHASHSEED set"), text);
    }

    @Test
    void builtinIsRefused() {
        String text = refusal(Map.of("PYTHONHASHSEED", "0"), "--l1-size-gb", "1", "--hash-algorithm", "builtin");
        assertTrue(text.startsWith("lmcache-server: error: --hash-algorithm: builtin (Python's hash())"), text);
    }

    @ParameterizedTest
    @ValueSource(strings = {"BLAKE3", "sha256", "sha256_cbor_64bit", "xxhash", "md5", ""})
    void otherNamesAreRefused(String name) {
        String text = refusal(Map.of("PYTHONHASHSEED", "0"), "--l1-size-gb", "1", "--hash-algorithm", name);
        assertTrue(text.contains("--hash-algorithm: must be blake3 or sha256_cbor, got '" + name + "'"), text);
    }

    @Test
    void theConfigFileNamesItToo(@TempDir Path dir) throws IOException {
        Path file = dir.resolve("hash.toml");
        Files.writeString(file, "l1_size_gb = 1\nhash_algorithm = \"sha256_cbor\"\n");
        assertEquals(new HashAlgorithm.Sha256Cbor("3"), algorithm(Map.of("PYTHONHASHSEED", "3"), "--config-file", file.toString()));
        assertTrue(refusal(Map.of(), "--config-file", file.toString()).contains("needs PYTHONHASHSEED"));
    }
}
