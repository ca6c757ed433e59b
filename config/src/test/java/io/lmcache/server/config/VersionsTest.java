package io.lmcache.server.config;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Test;

class VersionsTest {
    private static final String HEAD = "0123456789abcdef0123456789abcdef01234567";

    @Test
    void anExplicitCommitWinsThenTheCheckoutsThenUnknown() {
        assertEquals("abcdef1-dirty", Versions.commitOf("abcdef1-dirty", HEAD), "-Dlmcache.commit (bin/lmcache-server, the Dockerfile)");
        assertEquals(HEAD, Versions.commitOf("unknown", HEAD), "a plain mvn package in a checkout");
        assertEquals(HEAD, Versions.commitOf("${lmcache.commit}", HEAD), "an unfiltered placeholder is no commit");
        assertEquals("unknown", Versions.commitOf("unknown", "unknown"), "the image's build without .git or -Dlmcache.commit");
        assertEquals("unknown", Versions.commitOf("", "not a commit"));
    }

    /**
     * What this build recorded: the commit it was given, else what the SCM plugin reads of the checkout (CI builds a git
     * checkout): {@code git log -1 --no-merges}, HEAD unless HEAD is a merge.
     */
    @Test
    void theBuildRecordsTheCheckoutsCommit() throws Exception {
        String given = Versions.commitOf(System.getProperty("lmcache.commit", ""));
        String expected = given.equals("unknown") ? head() : given;
        assertEquals(expected, Versions.commit());
        assertTrue(Versions.versionWithCommit().startsWith(Versions.version() + "+" + expected.substring(0, 12)), Versions.versionWithCommit());
    }

    private static String head() throws IOException, InterruptedException {
        Path root = Path.of(System.getProperty("lmcache.repo.root", "."));
        Assumptions.assumeTrue(Files.exists(root.resolve(".git")), "not a git checkout: " + root);
        Process git = new ProcessBuilder("git", "-C", root.toString(), "log", "-1", "--no-merges", "--format=%H").redirectErrorStream(true)
                .start();
        String out = new String(git.getInputStream().readAllBytes(), StandardCharsets.UTF_8).strip();
        assertTrue(git.waitFor(30, TimeUnit.SECONDS) && git.exitValue() == 0, "git log -1 --no-merges: " + out);
        return out;
    }
}
