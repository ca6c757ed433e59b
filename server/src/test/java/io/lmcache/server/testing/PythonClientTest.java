package io.lmcache.server.testing;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** The Python client runner honours its timeout: a hung client fails the test, it does not hang the suite. */
class PythonClientTest {

    @Test
    @Timeout(value = 60, unit = TimeUnit.SECONDS)
    void aHungClientFailsAtItsTimeoutWithItsOutputAndLeavesNoProcessBehind() {
        // prints its own and a child's pid, then hangs; the child would outlive a kill of the parent alone
        String script = "import subprocess, sys, time\n"
                + "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)'])\n"
                + "print('parent', __import__('os').getpid(), 'child', child.pid, flush=True)\n"
                + "time.sleep(600)\n";
        AssertionError failure = assertThrows(AssertionError.class,
                () -> PythonClient.exec(List.of(PythonClient.python().toString(), "-c", script), 3));
        String message = failure.getMessage();
        assertTrue(message.contains("did not finish within"), message);
        Matcher pids = Pattern.compile("parent (\\d+) child (\\d+)").matcher(message);
        assertTrue(pids.find(), "the output so far is in the failure: " + message);
        for (int group = 1; group <= 2; group++) {
            long pid = Long.parseLong(pids.group(group));
            assertFalse(ProcessHandle.of(pid).map(ProcessHandle::isAlive).orElse(false), "process " + pid + " was killed");
        }
    }

    @Test
    @Timeout(value = 60, unit = TimeUnit.SECONDS)
    void aClientThatFinishesReturnsItsExitCodeAndOutput() {
        PythonClient.Result result = PythonClient.exec(List.of(PythonClient.python().toString(), "-c",
                "import sys; print('out'); print('err', file=sys.stderr); sys.exit(3)"), 30);
        assertEquals(3, result.exitCode());
        assertTrue(result.output().contains("out") && result.output().contains("err"), result.output());
    }
}
