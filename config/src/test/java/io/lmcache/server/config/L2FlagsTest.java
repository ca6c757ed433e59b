package io.lmcache.server.config;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.lmcache.server.l2.FsNativeSpec;
import io.lmcache.server.l2.L2AdapterSpec;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** The L2 flags (hybrid-and-l2.md §B.9) on the command line and in the TOML file. */
class L2FlagsTest {
    private static final String FS = "{\"type\":\"fs_native\",\"base_path\":\"/data/l2\"}";

    private static ConfigLoader.Outcome load(String... args) {
        return ConfigLoader.load(args, Map.of(), MemoryLimits.unlimited());
    }

    private static ServerConfig run(String... args) {
        ConfigLoader.Outcome outcome = load(args);
        return assertInstanceOf(ConfigLoader.Outcome.Run.class, outcome, () -> outcome.toString()).config();
    }

    private static String refused(String... args) {
        ConfigLoader.Outcome outcome = load(args);
        ConfigLoader.Outcome.Exit exit = assertInstanceOf(ConfigLoader.Outcome.Exit.class, outcome, () -> outcome.toString());
        assertEquals(2, exit.code());
        return exit.text().strip();
    }

    @Test
    void defaultsAreL1Only() {
        L2Settings l2 = run("--l1-size-gb", "1").l2();
        assertFalse(l2.enabled());
        assertFalse(l2.skipL1());
        assertFalse(l2.retainPrefetched());
        assertEquals(8, l2.prefetchMaxInFlight());
    }

    @Test
    void adaptersKeepTheirOrder() {
        String fault = "{\"type\":\"fault_inject\",\"rate\":0.5,\"inner\":" + FS + "}";
        ServerConfig c = run("--l1-size-gb", "1", "--l2-adapter", FS, "--l2-adapter", fault, "--l2-store-policy", "skip_l1",
                "--l2-prefetch-policy", "retain", "--l2-prefetch-max-in-flight", "2");
        assertEquals(List.of("fs_native", "fault_inject"), c.l2().adapters().stream().map(L2AdapterSpec::type).toList());
        assertTrue(c.l2().skipL1());
        assertTrue(c.l2().retainPrefetched());
        assertEquals(2, c.l2().prefetchMaxInFlight());
        assertEquals(List.of(FS, fault), c.describe().get("l2_adapter"));
        assertEquals("skip_l1", c.describe().get("l2_store_policy"));
    }

    @Test
    void fullAttentionOnlyAndTheWindowCommitFlags() {
        ServerConfig off = run("--l1-size-gb", "1");
        assertEquals(CommitSettings.NEVER, off.commit(), "the window commit is opt-in, as LMCache's --commit-policy never");
        assertEquals("never", off.describe().get("commit_policy"));
        ServerConfig c = run("--l1-size-gb", "1", "--l2-adapter", FS, "--l2-store-policy", "full_attention_only", "--commit-policy",
                "stop_token", "--commit-anchor", "prompt_end", "--commit-boundary-tokens", "151645,151643");
        assertTrue(c.l2().fullAttentionOnly());
        assertFalse(c.l2().skipL1());
        assertEquals("full_attention_only", c.describe().get("l2_store_policy"));
        assertEquals(new CommitSettings(CommitSettings.Policy.STOP_TOKEN, CommitSettings.Anchor.PROMPT_END, List.of(151643, 151645)),
                c.commit());
        assertEquals(List.of(151643, 151645), c.describe().get("commit_boundary_tokens"));
        assertTrue(refused("--l1-size-gb", "1", "--commit-policy", "turn_end").contains("--commit-policy: must be never or stop_token"));
        assertTrue(refused("--l1-size-gb", "1", "--commit-anchor", "end").contains("--commit-anchor: must be generation_end or prompt_end"));
        assertTrue(refused("--l1-size-gb", "1", "--commit-boundary-tokens", "x").contains("--commit-boundary-tokens: must be token ids"));
        assertTrue(refused("--l1-size-gb", "1", "--commit-boundary-tokens", "-1").contains("--commit-boundary-tokens: token ids"));
    }

    @Test
    void aBadAdapterExitsTwoNamingItsIndex() {
        assertTrue(refused("--l1-size-gb", "1", "--l2-adapter", FS, "--l2-adapter", "{\"type\":").startsWith(
                "lmcache-server: error: --l2-adapter #1: not valid JSON: "));
        assertEquals("lmcache-server: error: --l2-adapter #0: unknown type 'mooncake_store' (known: fs_native, fault_inject, resp, valkey, s3)"
                + " (see --help)",
                refused("--l1-size-gb", "1", "--l2-adapter", "{\"type\":\"mooncake_store\"}"));
        assertTrue(refused("--l1-size-gb", "1", "--l2-store-policy", "defer_windowed").contains("--l2-store-policy: must be default"));
        assertTrue(refused("--l1-size-gb", "1", "--l2-prefetch-policy", "striped").contains("--l2-prefetch-policy: must be default"));
        assertTrue(refused("--l1-size-gb", "1", "--l2-prefetch-max-in-flight", "0").contains("--l2-prefetch-max-in-flight: must be in 1..1024"));
    }

    @Test
    void admissionIsAllByDefaultAndFrequencyAndBudgetsParse() throws Exception {
        ServerConfig plain = run("--l1-size-gb", "1", "--l2-adapter", FS);
        assertEquals(L2AdmissionSettings.ALL, plain.l2().admission());
        assertEquals("all", plain.describe().get("l2_admission"));
        ServerConfig c = run("--l1-size-gb", "1", "--l2-adapter", FS, "--l2-admission", "frequency:3", "--l2-write-budget-bytes-per-second",
                "1000000");
        assertEquals(new L2AdmissionSettings(3, 1_000_000), c.l2().admission());
        assertEquals("frequency:3", c.describe().get("l2_admission"));
        assertEquals(1_000_000L, c.describe().get("l2_write_budget_bytes_per_second"));
        for (String bad : new String[] {"frequency:1", "frequency:16", "frequency:x", "lfu", "frequency:"}) {
            assertTrue(refused("--l1-size-gb", "1", "--l2-admission", bad).contains("--l2-admission: "), bad);
        }
        assertTrue(refused("--l1-size-gb", "1", "--l2-write-budget-bytes-per-second", "-1").contains("--l2-write-budget-bytes-per-second: "));
        assertTrue(refused("--l1-size-gb", "1", "--l2-write-budget-bytes-per-second", "1e6").contains("--l2-write-budget-bytes-per-second: "));
    }

    @Test
    void theConfigFileTakesAdaptersAsJsonOrTablesAndFlagsWin(@TempDir Path dir) throws IOException {
        Path file = dir.resolve("server.toml");
        Files.writeString(file, "l1_size_gb = 1\nl2_store_policy = \"skip_l1\"\nl2_adapter = ['" + FS + "', "
                + "{type = \"fault_inject\", gap_indices = [0], inner = {type = \"fs_native\", base_path = \"/x\"}}]\n");
        ServerConfig fromFile = run("--config-file", file.toString());
        assertEquals(List.of("fs_native", "fault_inject"), fromFile.l2().adapters().stream().map(L2AdapterSpec::type).toList());
        assertTrue(fromFile.l2().skipL1());
        ServerConfig flagsWin = run("--config-file", file.toString(), "--l2-adapter", "{\"type\":\"fs_native\",\"base_path\":\"/y\"}");
        assertEquals(1, flagsWin.l2().adapters().size());
        assertEquals("/y", ((FsNativeSpec) flagsWin.l2().adapters().getFirst()).basePath());
        Files.writeString(file, "l1_size_gb = 1\nl2_adapter = '{\"type\":\"nope\"}'\n");
        assertTrue(refused("--config-file", file.toString()).contains("--l2-adapter #0: unknown type 'nope'"));
    }
}
