package io.lmcache.server.agent;

import java.io.FileDescriptor;
import java.io.FileOutputStream;
import java.nio.charset.StandardCharsets;

/**
 * The last resort for an error after which the JVM cannot be trusted to allocate (a {@link VirtualMachineError}: out of
 * memory, a stack overflow, an internal error) that reached an uncaught-exception handler, or that a handler itself threw: the
 * process ends at once with {@link #EXIT_CODE} (what {@code -XX:+ExitOnOutOfMemoryError} exits with), so a restart policy
 * starts a fresh server rather than leaving one whose threads died. The way out allocates nothing: its line is encoded
 * ahead of time, written straight to file descriptor 2, and {@code halt} runs no shutdown hook (a hook would allocate, and
 * could wait on a lock the dead thread held). {@code -XX:+ExitOnOutOfMemoryError} (every launcher passes it) already ends
 * the JVM when it fails to allocate; this covers the errors thrown by Java code (direct memory) and the handlers themselves.
 * Any thread.
 */
public final class FatalErrors {
    /** The exit code: the same as the JVM's own {@code ExitOnOutOfMemoryError} and as a dead transport. */
    public static final int EXIT_CODE = 3;
    private static final String MESSAGE = "out of memory (or another error of the JVM) in a thread that cannot go on; exiting at"
            + " once (exit " + EXIT_CODE + ")";
    /** With LMCACHE_LOG_FORMAT=json the line is a JSON log line too, its time written into {@link #TIME} at the end. */
    private static final boolean JSON = "json".equalsIgnoreCase(String.valueOf(System.getenv("LMCACHE_LOG_FORMAT")).strip());
    private static final byte[] HEAD = ascii(JSON ? "{\"timestamp\":" : "lmcache-server: error: " + MESSAGE + System.lineSeparator());
    private static final byte[] TAIL = ascii(JSON ? ",\"level\":\"ERROR\",\"threadName\":\"last-resort\",\"loggerName\":\""
            + FatalErrors.class.getName() + "\",\"formattedMessage\":\"" + MESSAGE + "\"}" + System.lineSeparator() : "");
    private static final byte[] TIME = new byte[20];
    private static final FileOutputStream STDERR = new FileOutputStream(FileDescriptor.err);
    /** The process's own {@code halt}. */
    public static final Halter RUNTIME = status -> Runtime.getRuntime().halt(status);

    /** Ends the process; tests give one that records the status instead. */
    @FunctionalInterface
    public interface Halter {
        void halt(int status);
    }

    private FatalErrors() {}

    /** Whether nothing may be allocated after {@code failure}: a {@link VirtualMachineError}, also as the cause of another. */
    public static boolean isFatal(Throwable failure) {
        Throwable cause = failure;
        for (int depth = 0; cause != null && depth < 8; depth++) {
            if (cause instanceof VirtualMachineError) {
                return true;
            }
            cause = cause.getCause();
        }
        return false;
    }

    /** Halts the process when {@code failure} is fatal ({@link #isFatal}); returns otherwise. */
    public static void haltIfFatal(Throwable failure) {
        haltIfFatal(failure, RUNTIME);
    }

    /** As {@link #haltIfFatal(Throwable)}, through {@code halter}; returns whether it halted (a test's halter returns). */
    public static boolean haltIfFatal(Throwable failure, Halter halter) {
        if (!isFatal(failure)) {
            return false;
        }
        halt(halter);
        return true;
    }

    /** Writes the prepared line and halts with {@link #EXIT_CODE}, whatever the failure was (a handler that threw). */
    public static void halt() {
        halt(RUNTIME);
    }

    static void halt(Halter halter) {
        try {
            STDERR.write(HEAD);
            if (JSON) {
                int from = digits(System.currentTimeMillis());
                STDERR.write(TIME, from, TIME.length - from);
                STDERR.write(TAIL);
            }
        } catch (Throwable ignored) {
            // nothing more can be said: the exit code still tells
        }
        halter.halt(EXIT_CODE);
    }

    /** Writes {@code value}'s decimal digits at the end of {@link #TIME}; returns where they start. Allocates nothing. */
    private static int digits(long value) {
        int at = TIME.length;
        long rest = Math.max(0, value);
        do {
            TIME[--at] = (byte) ('0' + rest % 10);
            rest /= 10;
        } while (rest > 0 && at > 0);
        return at;
    }

    private static byte[] ascii(String text) {
        return text.getBytes(StandardCharsets.US_ASCII);
    }

    /**
     * The JVM's default handler for threads that have no handler of their own: a fatal error halts; anything else goes to
     * {@code otherwise} (which logs it), and if that throws, the process halts too.
     */
    public static Thread.UncaughtExceptionHandler defaultHandler(Thread.UncaughtExceptionHandler otherwise, Halter halter) {
        return (thread, failure) -> {
            if (haltIfFatal(failure, halter)) {
                return;
            }
            try {
                otherwise.uncaughtException(thread, failure);
            } catch (Throwable handlerFailure) {
                halt(halter);
            }
        };
    }

    /** As {@link #defaultHandler(Thread.UncaughtExceptionHandler, Halter)}, halting the runtime. */
    public static Thread.UncaughtExceptionHandler defaultHandler(Thread.UncaughtExceptionHandler otherwise) {
        return defaultHandler(otherwise, RUNTIME);
    }
}
