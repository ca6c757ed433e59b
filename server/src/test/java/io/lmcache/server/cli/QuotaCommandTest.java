package io.lmcache.server.cli;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.PrintWriter;
import java.io.StringWriter;
import org.junit.jupiter.api.Test;
import picocli.CommandLine;

/** LMCache's spelling of {@code kvcache clear} and {@code quota set|get|list|delete}, parsed without a server. */
class QuotaCommandTest {
    private static int run(StringWriter err, String... args) {
        CommandLine cli = LmcacheCli.commandLine();
        cli.setErr(new PrintWriter(err));
        cli.setOut(new PrintWriter(new StringWriter()));
        return cli.execute(args);
    }

    @Test
    void usageErrorsExitTwoBeforeAnyCall() {
        StringWriter err = new StringWriter();
        assertEquals(2, run(err, "quota", "set", "a", "--url", "http://127.0.0.1:1"), "--limit-gb is required");
        assertTrue(err.toString().contains("--limit-gb"), err.toString());
        assertEquals(2, run(new StringWriter(), "quota", "set", "a", "--limit-gb", "NaN", "--url", "http://127.0.0.1:1"));
        assertEquals(2, run(new StringWriter(), "quota", "get", "--url", "http://127.0.0.1:1"), "SALT is required");
        assertEquals(2, run(new StringWriter(), "quota", "frobnicate"));
        assertEquals(2, run(new StringWriter(), "kvcache", "clear", "--format", "yaml"));
        assertEquals(2, run(new StringWriter(), "kvcache"), "a sub-command is required, as in LMCache");
    }

    @Test
    void anUnreachableServerExitsOne() {
        StringWriter err = new StringWriter();
        assertEquals(1, run(err, "quota", "list", "--url", "http://127.0.0.1:1"));
        assertTrue(err.toString().contains("Cannot connect"), err.toString());
    }

    @Test
    void aUrlThatIsNoUriExitsOneWithTheSameLineAsAnUnreachableServer() {
        for (String[] args : new String[][] {{"quota", "list", "--url", "http://bad host:1"}, {"kvcache", "clear", "--url", "http://bad host:1"}}) {
            StringWriter err = new StringWriter();
            assertEquals(1, run(err, args), String.join(" ", args));
            assertTrue(err.toString().contains("Cannot connect"), err.toString());
        }
    }

    @Test
    void theEmptySaltIsLmcachesDefault() {
        assertEquals("_default", QuotaCommand.escape(""));
        assertEquals("tenant-a", QuotaCommand.escape("tenant-a"));
    }
}
