package io.lmcache.server.http;

import com.sun.management.HotSpotDiagnosticMXBean;
import java.lang.management.ManagementFactory;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Optional;

/**
 * Whether this JVM runs with the ahead-of-time cache (JEP 483, 515) the launcher passes: {@code file} is the
 * {@code -XX:AOTCache} VM option, {@code used} says the JVM mapped it. A cache that does not match (another runtime, a
 * rebuilt jar, a damaged file) is refused at start-up under {@code -XX:AOTMode=auto} and the JVM then shares nothing at all,
 * not even the JDK's default CDS archive, so "sharing" in {@code java.vm.info} (what {@code java -version} prints) means
 * the cache was mapped. {@code training}: this is the training run, which writes the cache at exit ({@code -XX:AOTCacheOutput}).
 */
public record AotCacheStatus(String file, String mode, boolean used, boolean training) {
    private static final AotCacheStatus THIS_JVM = read();

    public static AotCacheStatus thisJvm() {
        return THIS_JVM;
    }

    /**
     * What to tell the operator when the launcher passed a cache and the JVM refused it (its own lines about why are off:
     * they are plain text on stdout, ahead of structured logs); empty when there was none or it was used.
     */
    public Optional<String> refusal() {
        if (file.isEmpty() || used || training) {
            return Optional.empty();
        }
        return Optional.of("the ahead-of-time cache " + file + " was refused by the JVM (damaged, or made by another runtime,"
                + " other JVM flags or another build); serving without it: its first requests are slower. bin/lmcache-aot-train"
                + " makes a new one; LMCACHE_JAVA_OPTS=-Xlog:aot says why it was refused");
    }

    private static AotCacheStatus read() {
        String file = vmOption("AOTCache");
        boolean sharing = System.getProperty("java.vm.info", "").contains("sharing");
        return new AotCacheStatus(file, vmOption("AOTMode"), !file.isEmpty() && sharing, !vmOption("AOTCacheOutput").isEmpty());
    }

    /** The option's value; empty when unset or when this JVM has no such option (not HotSpot, or another release). */
    private static String vmOption(String name) {
        try {
            String value = ManagementFactory.getPlatformMXBean(HotSpotDiagnosticMXBean.class).getVMOption(name).getValue();
            return value == null ? "" : value;
        } catch (IllegalArgumentException | UnsupportedOperationException e) {
            return "";
        }
    }

    Map<String, Object> toMap() {
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("file", file);
        out.put("mode", mode);
        out.put("used", used);
        out.put("training", training);
        return out;
    }
}
