package io.lmcache.bench.events;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.OutputStreamWriter;
import java.io.Writer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * Acking {@code subscribe_kv_events} subscribers in another process ({@code testclient/gpu/kv_subscriber.py serve}, LMCache's
 * framing over libzmq or ZMTP), driven by one JSON line a command (attach, detach, stats, quit): a benchmark's subscribers then
 * never share the load generator's threads or cores' scheduling with its timed requests. The child's slots keep their cursors
 * and totals over attach/detach cycles, so one process can serve a whole run; {@link #stats} is cumulative.
 */
public final class ChildSubscribers implements AutoCloseable {
    static final String SCRIPT = "testclient/gpu/kv_subscriber.py";
    private static final Pattern RECORDS = Pattern.compile("\"records\": (\\d+)");
    private static final Pattern BATCHES = Pattern.compile("\"batches\": (\\d+)");
    private static final Pattern LOST = Pattern.compile("\"lost\": (\\d+)");

    private final Process process;
    private final BufferedReader out;
    private final Writer in;
    private final int count;

    /** What the subscribers received, summed over them; {@code slotsWithErrors}: slots whose streams reported an error. */
    public record Counts(long records, long batches, long lost, int slotsWithErrors) {
        /** What came between {@code before} and this (errors are the slots erring now). */
        public Counts since(Counts before) {
            return new Counts(records - before.records, batches - before.batches, lost - before.lost, slotsWithErrors);
        }
    }

    /**
     * {@code count} subscriber slots of the server on {@code port} (localhost), their instance ids drawn from {@code seed}; none
     * attached yet.
     */
    public ChildSubscribers(String python, int port, int count, int seed) throws IOException {
        this.count = count;
        process = new ProcessBuilder(python, SCRIPT, "serve", "--port", String.valueOf(port), "--subscribers", String.valueOf(count),
                "--seed", String.valueOf(seed)).redirectError(ProcessBuilder.Redirect.INHERIT).start();
        out = new BufferedReader(new InputStreamReader(process.getInputStream(), StandardCharsets.UTF_8));
        in = new OutputStreamWriter(process.getOutputStream(), StandardCharsets.UTF_8);
        answer(); // its transport line
    }

    /**
     * The python the child runs on: the test client's .venv where it exists (the system python3 may lack msgpack/msgspec), else
     * python3; "none" (no child subscribers) where this checkout lacks the script.
     */
    public static String defaultPython() {
        if (!Files.exists(Path.of(SCRIPT))) {
            return "none";
        }
        return Files.isExecutable(Path.of(".venv/bin/python")) ? ".venv/bin/python" : "python3";
    }

    public int count() {
        return count;
    }

    /** The child's pid (a benchmark counts its CPU as part of the load, not as another process's noise). */
    public long pid() {
        return process.pid();
    }

    /** Subscribes every slot to {@code model} from its cursor; returns once each stream's first batch came. */
    public void attach(String model) throws IOException {
        command("{\"op\": \"attach\", \"model\": \"" + model.replace("\\", "\\\\").replace("\"", "\\\"") + "\"}");
    }

    /** Cancels every stream and waits for its final reply. */
    public void detach() throws IOException {
        command("{\"op\": \"detach\"}");
    }

    /** The totals so far, the live streams' included. */
    public Counts stats() throws IOException {
        String line = command("{\"op\": \"stats\"}");
        int slots = count(Pattern.compile("\"instance_id\"").matcher(line));
        int clean = count(Pattern.compile("\"errors\": \\[\\]").matcher(line));
        return new Counts(sum(RECORDS.matcher(line)), sum(BATCHES.matcher(line)), sum(LOST.matcher(line)), slots - clean);
    }

    private static long sum(Matcher m) {
        long sum = 0;
        while (m.find()) {
            sum += Long.parseLong(m.group(1));
        }
        return sum;
    }

    private static int count(Matcher m) {
        int n = 0;
        while (m.find()) {
            n++;
        }
        return n;
    }

    private String answer() throws IOException {
        String line = out.readLine();
        if (line == null || line.contains("\"error\"")) {
            throw new IllegalStateException("the subscriber process failed: " + line);
        }
        return line;
    }

    private String command(String json) throws IOException {
        in.write(json + "\n");
        in.flush();
        return answer();
    }

    @Override
    public void close() throws InterruptedException {
        try {
            command("{\"op\": \"quit\"}");
        } catch (IOException | IllegalStateException e) {
            // it is gone already: destroyed below
        }
        if (!process.waitFor(30, TimeUnit.SECONDS)) {
            process.destroyForcibly();
        }
    }
}
