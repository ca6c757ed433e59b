package io.lmcache.server.testing;

import static org.awaitility.Awaitility.await;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicReference;

/**
 * A test worker in a process of its own (a {@code main} class on the test classpath): started,
 * awaited until it prints {@code READY ...}, and killed with SIGKILL as a crashing vLLM worker
 * would be. Its other output goes to stderr under its name.
 */
public final class WorkerProcess implements AutoCloseable {
    private final Process process;
    private final String ready;

    private WorkerProcess(Process process, String ready) {
        this.process = process;
        this.ready = ready;
    }

    public static WorkerProcess start(String name, Class<?> main, String... args) {
        List<String> command = new ArrayList<>(List.of(System.getProperty("lmcache.test.java"), "--enable-native-access=ALL-UNNAMED",
                "--sun-misc-unsafe-memory-access=allow", "-Xmx128m", "-cp", System.getProperty("java.class.path"), main.getName()));
        command.addAll(List.of(args));
        Process process;
        try {
            process = new ProcessBuilder(command).redirectErrorStream(true).start();
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
        BufferedReader out = new BufferedReader(new InputStreamReader(process.getInputStream(), StandardCharsets.UTF_8));
        AtomicReference<String> ready = new AtomicReference<>();
        Thread reader = new Thread(() -> {
            try {
                String line;
                while ((line = out.readLine()) != null) {
                    if (line.startsWith("READY") && ready.get() == null) {
                        ready.set(line);
                    } else {
                        System.err.println("[" + name + "] " + line);
                    }
                }
            } catch (IOException e) {
                // the process ended
            }
        });
        reader.setDaemon(true);
        reader.start();
        await(name + " ready").atMost(Duration.ofSeconds(30)).until(() -> ready.get() != null || !process.isAlive());
        if (ready.get() == null) {
            throw new IllegalStateException(name + " exited with " + process.exitValue() + " before it was ready");
        }
        return new WorkerProcess(process, ready.get());
    }

    /** What the worker printed after {@code READY}, split at spaces. */
    public List<String> readyWords() {
        String rest = ready.substring("READY".length()).trim();
        return rest.isEmpty() ? List.of() : List.of(rest.split(" "));
    }

    public long pid() {
        return process.pid();
    }

    public boolean isAlive() {
        return process.isAlive();
    }

    /** SIGKILL, and waits until the process is gone (its sockets are closed by the kernel then). */
    public void kill() {
        process.destroyForcibly();
        try {
            process.waitFor();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    @Override
    public void close() {
        if (process.isAlive()) {
            kill();
        }
    }
}
