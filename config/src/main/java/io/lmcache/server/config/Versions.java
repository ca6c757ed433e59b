package io.lmcache.server.config;

import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.util.Properties;
import picocli.CommandLine.IVersionProvider;

/** The build's version, read from a resource Maven filters at build time. */
public final class Versions implements IVersionProvider {
    private static final String VERSION = load();

    public static String version() {
        return VERSION;
    }

    @Override
    public String[] getVersion() {
        return new String[] {
            "lmcache-server " + VERSION,
            "LMCache MP wire protocol: frozen op ids 1..34 and string op names",
            "Java " + Runtime.version()
        };
    }

    private static String load() {
        try (InputStream in = Versions.class.getResourceAsStream("/lmcache-server-version.properties")) {
            if (in == null) {
                return "unknown";
            }
            Properties props = new Properties();
            props.load(in);
            return props.getProperty("version", "unknown");
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }
}
