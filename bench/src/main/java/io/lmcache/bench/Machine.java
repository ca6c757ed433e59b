package io.lmcache.bench;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.ZonedDateTime;
import java.time.format.DateTimeFormatter;
import java.util.List;

/**
 * What every result is recorded with: the machine, and how busy it was. The machine is shared, so
 * besides the load averages a measurement also records the CPU that processes other than its own
 * used while it ran ({@link CpuSample}): the 1-minute load average lags by a minute and counts our
 * own previous run, the /proc counters do not.
 */
public final class Machine {
    private Machine() {}

    /** The commit of the server sources measured, as bench/classpath.sh found it. */
    public static String source() {
        String source = System.getenv("LMCACHE_BENCH_SOURCE");
        return source == null ? "unknown" : source;
    }

    /** The run a results section records: the exact command, the machine, its load averages before, other processes' cores. */
    public record Run(String command, String machine, String loadBefore, double foreignCores) {}

    /** {@link #sectionHead(StringBuilder, String, String, String, String, double)} for one {@link Run}. */
    public static void sectionHead(StringBuilder md, String title, Run run) {
        sectionHead(md, title, run.command(), run.machine(), run.loadBefore(), run.foreignCores());
    }

    /** The head every results section starts with: title, command, sources, machine, and how quiet the machine was. */
    public static void sectionHead(StringBuilder md, String title, String command, String machine, String loadBefore,
            double foreignCores) {
        md.append("### ").append(title).append("\n\n");
        md.append("Command: `").append(command).append("`  \n");
        md.append("Sources: commit ").append(source()).append("  \n");
        md.append("Machine: ").append(machine).append("  \n");
        md.append(String.format("Load averages before: %s; other processes used %.2f cores during the run.%n%n", loadBefore, foreignCores));
    }

    /** One line: CPU model, cores, RAM, kernel, Java, date. */
    public static String describe() {
        String cpu = read("/proc/cpuinfo").lines().filter(l -> l.startsWith("model name")).findFirst()
                .map(l -> l.substring(l.indexOf(':') + 1).trim()).orElse("unknown CPU");
        long memKb = read("/proc/meminfo").lines().filter(l -> l.startsWith("MemTotal:")).findFirst()
                .map(l -> Long.parseLong(l.replaceAll("\\D", ""))).orElse(0L);
        return String.format("%s, %d cores, %.1f GiB RAM, Linux %s, Java %s (%s), %s", cpu, Runtime.getRuntime().availableProcessors(),
                memKb / 1048576.0, read("/proc/sys/kernel/osrelease").trim(), System.getProperty("java.runtime.version"),
                System.getProperty("java.vendor"), now());
    }

    public static String now() {
        return ZonedDateTime.now().format(DateTimeFormatter.ofPattern("yyyy-MM-dd HH:mm:ss z"));
    }

    /** The three load averages, as {@code uptime} prints them. */
    public static String loadAverages() {
        List<String> fields = List.of(read("/proc/loadavg").trim().split("\\s+"));
        return String.join(" ", fields.subList(0, 3));
    }

    /** Busy CPU ticks of the whole machine and of some processes, to tell their CPU from everyone else's. */
    public record CpuSample(long machineBusyTicks, long ownTicks, long nanoTime) {
        public static CpuSample take(long... pids) {
            String[] cpu = read("/proc/stat").lines().findFirst().orElseThrow().trim().split("\\s+");
            long busy = 0;
            for (int i = 1; i < cpu.length && i <= 8; i++) {
                // user nice system idle iowait irq softirq steal: everything but idle (4) and iowait (5)
                if (i != 4 && i != 5) {
                    busy += Long.parseLong(cpu[i]);
                }
            }
            long own = 0;
            for (long pid : pids) {
                own += processTicks(pid);
            }
            return new CpuSample(busy, own, System.nanoTime());
        }

        /** Cores (on average) that other processes kept busy between {@code before} and this sample. */
        public double foreignCoresSince(CpuSample before) {
            double ticksPerSecond = 100; // USER_HZ: /proc/stat and /proc/<pid>/stat both count in it
            double seconds = (nanoTime - before.nanoTime) / 1e9;
            long foreign = (machineBusyTicks - before.machineBusyTicks) - (ownTicks - before.ownTicks);
            return Math.max(0, foreign / ticksPerSecond / seconds);
        }
    }

    /** CPU time a process has used so far, in seconds (10 ms resolution). */
    public static double processCpuSeconds(long pid) {
        return processTicks(pid) / 100.0; // USER_HZ
    }

    private static long processTicks(long pid) {
        String stat = read("/proc/" + pid + "/stat");
        // the command name (field 2) may hold spaces: count fields after its closing parenthesis
        String[] rest = stat.substring(stat.lastIndexOf(')') + 2).split(" ");
        // utime, stime, and cutime, cstime (fields 14..17): the last two count children that exited and were
        // waited for, such as JMH's forks; a child still running is sampled by its own pid
        return Long.parseLong(rest[11]) + Long.parseLong(rest[12]) + Long.parseLong(rest[13]) + Long.parseLong(rest[14]);
    }

    private static String read(String path) {
        try {
            return Files.readString(Path.of(path));
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }
}
