package io.lmcache.server.agent;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

/** Which failures end the process through the last resort, and that a handler which itself throws ends it too. */
class FatalErrorsTest {
    /** Records the exit status instead of halting. */
    private static final class Halts implements FatalErrors.Halter {
        final List<Integer> statuses = new ArrayList<>();

        @Override
        public void halt(int status) {
            statuses.add(status);
        }
    }

    @Test
    void outOfMemoryAndOtherVirtualMachineErrorsHaltWithExitCode3() {
        for (Throwable fatal : List.of(new OutOfMemoryError("Java heap space"), new StackOverflowError(), new InternalError("x"),
                new RuntimeException("wrapped", new OutOfMemoryError("Direct buffer memory")))) {
            Halts halts = new Halts();
            assertTrue(FatalErrors.haltIfFatal(fatal, halts), fatal.toString());
            assertEquals(List.of(3), halts.statuses, fatal.toString());
        }
    }

    @Test
    void ordinaryFailuresDoNotHalt() {
        for (Throwable survivable : List.of(new IllegalStateException("x"), new AssertionError("x"), new LinkageError("x"))) {
            Halts halts = new Halts();
            assertFalse(FatalErrors.haltIfFatal(survivable, halts), survivable.toString());
            assertEquals(List.of(), halts.statuses);
        }
    }

    @Test
    void theDefaultHandlerHaltsOnOutOfMemoryWithoutCallingTheOrdinaryHandler() {
        Halts halts = new Halts();
        List<Throwable> logged = new ArrayList<>();
        Thread.UncaughtExceptionHandler handler = FatalErrors.defaultHandler((thread, failure) -> logged.add(failure), halts);
        handler.uncaughtException(Thread.currentThread(), new OutOfMemoryError("Java heap space"));
        assertEquals(List.of(3), halts.statuses);
        assertEquals(List.of(), logged, "the ordinary path allocates: it is not taken");
    }

    @Test
    void theDefaultHandlerLogsOrdinaryFailuresAndHaltsWhenLoggingThrows() {
        Halts halts = new Halts();
        List<Throwable> logged = new ArrayList<>();
        IllegalStateException failure = new IllegalStateException("boom");
        FatalErrors.defaultHandler((thread, f) -> logged.add(f), halts).uncaughtException(Thread.currentThread(), failure);
        assertEquals(List.of(failure), logged);
        assertEquals(List.of(), halts.statuses, "an ordinary failure is only logged");

        FatalErrors.defaultHandler((thread, f) -> {
            throw new OutOfMemoryError("the log line itself ran out of memory");
        }, halts).uncaughtException(Thread.currentThread(), failure);
        assertEquals(List.of(3), halts.statuses, "an error thrown inside the handler ends the process instead of wedging it");
    }
}
