package io.lmcache.server.testing;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.TimeUnit;

/**
 * Runs a child process to completion within a bound. Its output goes to files, never to a pipe
 * read before the wait: a hung child (or a grandchild holding the pipe open) then fails the test
 * at the bound, with the output it wrote so far, instead of hanging the suite.
 */
public final class Processes {
    private Processes() {}

    /** Exit code and what the process wrote; {@code stderr} is empty when it was merged into {@code stdout}. */
    public record Result(int exitCode, String stdout, String stderr) {}

    /**
     * Starts {@code builder} with its stdout and stderr redirected to temporary files (merged when
     * the builder says so), waits at most {@code timeout}, and on timeout kills the process and
     * every descendant and throws an {@link AssertionError} carrying the output so far.
     */
    public static Result run(ProcessBuilder builder, Duration timeout) {
        Path out = null;
        Path err = null;
        try {
            out = Files.createTempFile("lmcache-test-out-", ".log");
            err = Files.createTempFile("lmcache-test-err-", ".log");
            builder.redirectOutput(out.toFile());
            if (!builder.redirectErrorStream()) {
                builder.redirectError(err.toFile());
            }
            Process process = builder.start();
            if (!process.waitFor(timeout.toMillis(), TimeUnit.MILLISECONDS)) {
                killTree(process.toHandle());
                throw new AssertionError("process did not finish within " + timeout + ", killed with its descendants: "
                        + builder.command() + "\n--- output so far ---\n" + read(out) + read(err));
            }
            return new Result(process.exitValue(), read(out), read(err));
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException(e);
        } finally {
            deleteQuietly(out);
            deleteQuietly(err);
        }
    }

    /**
     * SIGKILLs {@code root} and its descendants and waits (bounded) until they are gone. The tree is
     * listed before the root dies: afterwards its children are re-parented and no longer findable.
     */
    public static void killTree(ProcessHandle root) {
        List<ProcessHandle> tree = root.descendants().toList();
        root.destroyForcibly();
        tree.forEach(ProcessHandle::destroyForcibly);
        for (ProcessHandle handle : tree) {
            handle.onExit().completeOnTimeout(handle, 10, TimeUnit.SECONDS).join();
        }
        root.onExit().completeOnTimeout(root, 10, TimeUnit.SECONDS).join();
    }

    private static String read(Path file) {
        try {
            return Files.readString(file, StandardCharsets.UTF_8);
        } catch (IOException e) {
            return "<cannot read " + file + ": " + e + ">";
        }
    }

    private static void deleteQuietly(Path file) {
        if (file == null) {
            return;
        }
        try {
            Files.deleteIfExists(file);
        } catch (IOException e) {
            // a temporary file left behind is harmless
        }
    }
}
