package io.lmcache.server.cuda;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;

/** Posted tasks (an idle lane's context warm-up) run on the poller's next pass, once each, and a failing one stops no other. */
class EventPollerTest {
    @Test
    void postedTasksRunAtTheNextPassInOrderAndWakeThePoller() {
        AtomicInteger wakes = new AtomicInteger();
        EventPoller poller = new EventPoller(wakes::incrementAndGet);
        List<String> ran = new ArrayList<>();
        poller.runSoon(() -> ran.add("first"));
        poller.runSoon(() -> {
            throw new IllegalStateException("the driver refused the launch");
        });
        poller.runSoon(() -> ran.add("third"));
        assertEquals(3, wakes.get());
        assertEquals(List.of(), ran); // nothing runs on the posting thread
        assertEquals(3, poller.doWork());
        assertEquals(List.of("first", "third"), ran);
        assertEquals(0, poller.doWork()); // each once
        poller.close();
    }
}
