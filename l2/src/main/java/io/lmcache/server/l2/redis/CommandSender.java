package io.lmcache.server.l2.redis;

import io.lettuce.core.RedisCommandExecutionException;
import io.lettuce.core.RedisCommandTimeoutException;
import io.lettuce.core.RedisConnectionException;
import io.lettuce.core.RedisException;
import io.lettuce.core.api.StatefulConnection;
import io.lettuce.core.protocol.AsyncCommand;
import io.lettuce.core.protocol.Command;
import java.io.Serial;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.function.BiConsumer;

/**
 * Sends one command for a key held by one node: refused at once while the node's breaker is open ({@link NodeBreakers}), else
 * dispatched to Lettuce with a backstop timer of ours, and its outcome (an answer, or a timeout) told to the breaker.
 */
final class CommandSender {
    /** Lettuce times every command out at request_timeout; this much later our own timer answers for it, whatever happened. */
    static final long BACKSTOP_NS = TimeUnit.SECONDS.toNanos(1);

    /** The command was not sent: its node's breaker is open. */
    static final class NodeOpenException extends RedisException {
        @Serial
        private static final long serialVersionUID = 1L;

        NodeOpenException(String node) {
            super("node " + node + " is not answering (circuit breaker open): not sent");
        }
    }

    private final ScheduledExecutorService scheduler;
    private final long requestTimeoutNs;
    private final NodeBreakers breakers;

    CommandSender(ScheduledExecutorService scheduler, long requestTimeoutNs, NodeBreakers breakers) {
        this.scheduler = scheduler;
        this.requestTimeoutNs = requestTimeoutNs;
        this.breakers = breakers;
    }

    /** {@code done} runs exactly once: with Lettuce's answer, a timeout from our backstop timer, or a refusal (breaker open). */
    <T> void send(StatefulConnection<String, LentBuffer> connection, String node, Command<String, LentBuffer, T> command,
            BiConsumer<T, Throwable> done) {
        if (!breakers.allows(node)) {
            done.accept(null, new NodeOpenException(node));
            return;
        }
        AsyncCommand<String, LentBuffer, T> async = new AsyncCommand<>(command);
        CompletableFuture<T> answer = new CompletableFuture<>();
        ScheduledFuture<?> backstop = null;
        try {
            backstop = scheduler.schedule(() -> answer.completeExceptionally(new TimeoutException("no answer from Lettuce within "
                    + TimeUnit.NANOSECONDS.toMillis(requestTimeoutNs + BACKSTOP_NS) + " ms")), requestTimeoutNs + BACKSTOP_NS,
                    TimeUnit.NANOSECONDS);
        } catch (RejectedExecutionException e) {
            // closing: Lettuce's own timeout still bounds the command
        }
        ScheduledFuture<?> timer = backstop;
        // runs on: a Lettuce I/O thread (an answer), the scheduler (a timeout), or this thread (a command refused at once)
        answer.whenComplete((value, error) -> {
            if (timer != null) {
                timer.cancel(false);
            }
            String why = error == null ? "" : reason(error);
            if (node.isEmpty()) {
                // no master known for the slot yet: nothing to open
            } else if (why.equals("timeout")) {
                breakers.timedOut(node);
            } else if (error == null || why.equals("server_error")) {
                breakers.answered(node);
            }
            done.accept(value, error);
        });
        async.whenComplete((value, error) -> {
            if (error == null) {
                answer.complete(value);
            } else {
                answer.completeExceptionally(error);
            }
        });
        try {
            connection.dispatch(async);
        } catch (RuntimeException e) {
            answer.completeExceptionally(e);
        }
    }

    /** The failure reason a /status counter is kept under. */
    static String reason(Throwable error) {
        Throwable cause = error instanceof CompletionException && error.getCause() != null ? error.getCause() : error;
        return switch (cause) {
            case RedisCommandTimeoutException t -> "timeout";
            case TimeoutException t -> "timeout";
            case NodeOpenException e -> "node_open";
            case RedisConnectionException e -> "connection";
            case RedisCommandExecutionException e -> "server_error";
            case RedisException e when String.valueOf(e.getMessage()).contains("not connected") -> "disconnected";
            default -> "error";
        };
    }
}
