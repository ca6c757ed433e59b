package io.lmcache.server.http;

import com.sun.management.HotSpotDiagnosticMXBean;
import java.lang.management.ManagementFactory;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * Whether this JVM runs with the ahead-of-time cache (JEP 483, 515) the launcher passes: {@code file} is the
 * {@code -XX:AOTCache} VM option, {@code used} says the JVM mapped it. A cache that does not match (another runtime, a
 * rebuilt jar, a damaged file) is refused at start-up under {@code -XX:AOTMode=auto} and the JVM then shares nothing at all,
 * not even the JDK's default CDS archive, so "sharing" in {@code java.vm.info} (what {@code java -version} prints) means
 * the cache was mapped. {@code training}: this is the training run, which writes the cache at exit ({@code -XX:AOTCacheOutput}).
 */
record AotCacheStatus(String file, String mode, boolean used, boolean training) {
    private static final AotCacheStatus THIS_JVM = read();

    static AotCacheStatus thisJvm() {
        return THIS_JVM;
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
