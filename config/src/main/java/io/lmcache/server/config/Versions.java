package io.lmcache.server.config;

import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.util.Properties;
import picocli.CommandLine.IVersionProvider;

/**
 * The build's version and commit, read from a resource Maven filters at build time. The commit is the
 * build's {@code -Dlmcache.commit=...} when it was given one (the Dockerfile, which builds without
 * {@code .git}; bin/lmcache-server, which adds {@code -dirty}), else the commit buildnumber-maven-plugin found, so a plain
 * {@code mvn package} or {@code mvn verify} names one too: its git provider runs {@code git log -1 --no-merges}, so that is
 * HEAD, or, when HEAD is a merge, the newest commit below it that is not (the launchers pass the exact HEAD).
 */
public final class Versions implements IVersionProvider {
    private static final Properties BUILD = load();
    private static final String VERSION = BUILD.getProperty("version", "unknown");
    private static final String COMMIT = commitOf(BUILD.getProperty("commit", ""), BUILD.getProperty("git.commit", ""));

    public static String version() {
        return VERSION;
    }

    /** The commit the build was made from, or "unknown". */
    public static String commit() {
        return COMMIT;
    }

    /** The version with the commit as build metadata ({@code 0.1.0+1a2b3c4d5e6f}), as {@code /version} shows it. */
    public static String versionWithCommit() {
        if (COMMIT.equals("unknown")) {
            return VERSION;
        }
        boolean dirty = COMMIT.endsWith("-dirty");
        String hex = dirty ? COMMIT.substring(0, COMMIT.length() - "-dirty".length()) : COMMIT;
        return VERSION + "+" + hex.substring(0, Math.min(12, hex.length())) + (dirty ? "-dirty" : "");
    }

    @Override
    public String[] getVersion() {
        return new String[] {
            "lmcache-server " + VERSION + " (commit " + COMMIT + ")",
            "LMCache MP wire protocol: frozen op ids 1..34 and string op names",
            "Java " + Runtime.version()
        };
    }

    /** The explicit commit when it is one, else the checkout's, else "unknown". */
    static String commitOf(String explicit, String checkout) {
        String given = commitOf(explicit);
        return given.equals("unknown") ? commitOf(checkout) : given;
    }

    /** A filtered value, or "unknown" when the build did not set it (the placeholder is left as is). */
    static String commitOf(String raw) {
        String value = raw.strip();
        return value.isEmpty() || value.startsWith("${") || !value.matches("[0-9a-fA-F]{7,40}(-dirty)?") ? "unknown" : value;
    }

    private static Properties load() {
        try (InputStream in = Versions.class.getResourceAsStream("/lmcache-server-version.properties")) {
            Properties props = new Properties();
            if (in != null) {
                props.load(in);
            }
            return props;
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }
}
