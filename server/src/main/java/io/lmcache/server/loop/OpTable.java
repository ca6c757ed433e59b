package io.lmcache.server.loop;

import io.lmcache.server.peer.PeerId;
import io.lmcache.server.protocol.Op;
import io.lmcache.server.protocol.Reply;
import io.lmcache.server.protocol.Request;
import io.lmcache.server.protocol.RequestDecoder.PayloadDecoder;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.function.Supplier;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Every op's facts in one place (LMCache's {@code EngineModule.get_handlers()}): each module declares
 * its ops into a {@link Builder}, and {@link Builder#build} refuses a table that leaves any op out, so
 * a new op cannot reach the dispatcher with a silent default kind, arity or failure value.
 */
public final class OpTable {
    private static final Logger LOG = LoggerFactory.getLogger(OpTable.class);
    private static final Op[] OPS = Op.values();

    /** Indexed by {@link Op#ordinal()}: the dispatch hot path is one array load. */
    private final OpEntry[] entries;

    private OpTable(OpEntry[] entries) {
        this.entries = entries;
    }

    public static Builder builder() {
        return new Builder();
    }

    public OpEntry entry(Op op) {
        return entries[op.ordinal()];
    }

    /** A module's handler written against the module, so one declaration serves a live and a disabled module. */
    @FunctionalInterface
    public interface ModuleHandler<M, R extends Request> {
        Reply handle(M module, R request, PeerId peer) throws Exception;
    }

    /** A module's handler of an op answered with several frames ({@link ReplyChannel}: the frames before the last). */
    @FunctionalInterface
    public interface ModulePartialsHandler<M, R extends Request> {
        Reply handle(M module, R request, PeerId peer, ReplyChannel partials) throws Exception;
    }

    /** Collects the modules' declarations; not thread-safe (start-up only). */
    public static final class Builder {
        private final OpEntry[] entries = new OpEntry[OPS.length];

        private Builder() {}

        /** Declares an op this server serves, with a constant failure value. */
        public <R extends Request> Builder op(Op op, HandlerKind kind, PayloadDecoder<R> decoder, RequestHandler<? super R> handler,
                Reply failure) {
            return op(op, kind, decoder, handler, constant(failure));
        }

        /** Declares an op this server serves, whose failure value is made for each failure (it must never throw). */
        public <R extends Request> Builder op(Op op, HandlerKind kind, PayloadDecoder<R> decoder, RequestHandler<? super R> handler,
                Supplier<Reply> failure) {
            return handled(op, kind, decoder, handler, failure, false);
        }

        /**
         * Declares a registration: its handler runs on the peer's transfer lane ({@link HandlerKind#AFFINITY}), and one still
         * running at the lanes' deadline is answered with {@code failure} ({@link OpEntry.Handled#answeredAtDeadline}).
         */
        public <R extends Request> Builder registration(Op op, PayloadDecoder<R> decoder, RequestHandler<? super R> handler, Reply failure) {
            return handled(op, HandlerKind.AFFINITY, decoder, handler, constant(failure), true);
        }

        private <R extends Request> Builder handled(Op op, HandlerKind kind, PayloadDecoder<R> decoder, RequestHandler<? super R> handler,
                Supplier<Reply> failure, boolean answeredAtDeadline) {
            requireDecoded(op);
            return put(new OpEntry.Handled<>(op, Objects.requireNonNull(kind), Objects.requireNonNull(decoder),
                    Objects.requireNonNull(handler), Objects.requireNonNull(failure), answeredAtDeadline));
        }

        /** Declares an op answered with a stream of replies ({@link OpEntry.Streamed}). */
        public <R extends Request> Builder streamed(Op op, PayloadDecoder<R> decoder, StreamHandler<? super R> handler) {
            requireDecoded(op);
            return put(new OpEntry.Streamed<>(op, Objects.requireNonNull(decoder), Objects.requireNonNull(handler)));
        }

        /** A served op reads its payload frames: {@link Op} must say how many. */
        private static void requireDecoded(Op op) {
            if (op.maxPayloads() < 0) {
                throw new IllegalArgumentException("op table: " + op.wireName() + " has no payload count in Op (" + op.maxPayloads() + ")");
            }
        }

        /** Declares the ops of a feature this server does not provide (no reply, a counter, one warning). */
        public Builder unsupported(String feature, Op... ops) {
            for (Op op : ops) {
                put(new OpEntry.Unsupported(op, feature));
            }
            return this;
        }

        /** Declarations whose handlers run on {@code module}. */
        public <M> ModuleOps<M> module(M module) {
            return new ModuleOps<>(this, Objects.requireNonNull(module), null);
        }

        /**
         * The null object of a module that the configuration leaves out: the same declarations, each op
         * answered with its failure value and warned about once.
         *
         * @param mode the left-out mode's name, for the warning
         */
        public <M> ModuleOps<M> disabled(String mode) {
            return new ModuleOps<>(this, null, Objects.requireNonNull(mode));
        }

        /** The table; throws, naming them, when any op has no entry (the server then does not start). */
        public OpTable build() {
            List<String> missing = new ArrayList<>();
            for (Op op : OPS) {
                if (entries[op.ordinal()] == null) {
                    missing.add(op.wireName() + " (op " + op.id() + ")");
                }
            }
            if (!missing.isEmpty()) {
                throw new IllegalStateException("op table: no entry for " + String.join(", ", missing)
                        + "; every op a client sends needs a handler or an unsupported entry");
            }
            return new OpTable(entries.clone());
        }

        /** Whether {@code op} has an entry yet (a partial table, such as the warm-up's, declares the rest unsupported). */
        public boolean declared(Op op) {
            return entries[op.ordinal()] != null;
        }

        private Builder put(OpEntry entry) {
            int slot = entry.op().ordinal();
            if (entries[slot] != null) {
                throw new IllegalStateException("op table: " + entry.op().wireName() + " is declared twice");
            }
            entries[slot] = entry;
            return this;
        }
    }

    /** One module's declarations, bound to the live module or, when it is disabled, to its failure values. */
    public static final class ModuleOps<M> {
        private final Builder builder;
        private final M module;
        private final String disabledMode;

        private ModuleOps(Builder builder, M module, String disabledMode) {
            this.builder = builder;
            this.module = module;
            this.disabledMode = disabledMode;
        }

        public <R extends Request> ModuleOps<M> op(Op op, HandlerKind kind, PayloadDecoder<R> decoder, ModuleHandler<M, ? super R> handler,
                Reply failure) {
            return op(op, kind, decoder, handler, constant(failure));
        }

        /**
         * An op answered with several frames under one uid (LMCache's {@code HandlerType.STREAMING}, e.g. RETRIEVE_LAYERWISE):
         * the handler queues the frames before its last reply through its {@link ReplyChannel}; a disabled module answers
         * with {@code failure} alone.
         */
        public <R extends Request> ModuleOps<M> partialsOp(Op op, HandlerKind kind, PayloadDecoder<R> decoder,
                ModulePartialsHandler<M, ? super R> handler, Reply failure) {
            M live = module;
            RequestHandler<R> bound = live != null ? new PartialsOp<>(live, handler) : new DisabledOp<>(op, disabledMode, constant(failure));
            builder.op(op, kind, decoder, bound, failure);
            return this;
        }

        /** A registration ({@link Builder#registration}): on the peer's transfer lane, answered at the lanes' deadline. */
        public <R extends Request> ModuleOps<M> registration(Op op, PayloadDecoder<R> decoder, ModuleHandler<M, ? super R> handler,
                Reply failure) {
            builder.registration(op, decoder, bind(op, handler, constant(failure)), failure);
            return this;
        }

        /** An op whose failure value is made for each failure (STORE/RETRIEVE: the GPU backend's event); it must never throw. */
        public <R extends Request> ModuleOps<M> op(Op op, HandlerKind kind, PayloadDecoder<R> decoder, ModuleHandler<M, ? super R> handler,
                Supplier<Reply> failure) {
            builder.op(op, kind, decoder, bind(op, handler, failure), failure);
            return this;
        }

        /** {@code handler} on the live module, or, when the module is disabled, its failure value and a warning. */
        private <R extends Request> RequestHandler<R> bind(Op op, ModuleHandler<M, ? super R> handler, Supplier<Reply> failure) {
            M live = module;
            return live != null ? (request, peer) -> handler.handle(live, request, peer) : new DisabledOp<>(op, disabledMode, failure);
        }
    }

    /** A live module's handler that may send frames before its reply. */
    private record PartialsOp<M, R extends Request>(M module, ModulePartialsHandler<M, ? super R> handler) implements RequestHandler<R> {
        @Override
        public Reply handle(R request, PeerId peer) throws Exception {
            return handler.handle(module, request, peer, ReplyChannel.NONE);
        }

        @Override
        public Reply handle(R request, PeerId peer, ReplyChannel partials) throws Exception {
            return handler.handle(module, request, peer, partials);
        }
    }

    /** A disabled module's handler: the op's failure value, and one warning for the first request. */
    private static final class DisabledOp<R extends Request> implements RequestHandler<R> {
        private final Op op;
        private final String mode;
        private final Supplier<Reply> failure;
        private final AtomicBoolean warned = new AtomicBoolean();

        DisabledOp(Op op, String mode, Supplier<Reply> failure) {
            this.op = op;
            this.mode = mode;
            this.failure = failure;
        }

        @Override
        public Reply handle(R request, PeerId peer) {
            if (!warned.get() && warned.compareAndSet(false, true)) {
                LOG.warn("{} needs {} transfers, which --supported-transfer-mode leaves out; answering with its failure value"
                        + " (further ones are not logged)", op.wireName(), mode);
            }
            return failure.get();
        }
    }

    private static Supplier<Reply> constant(Reply failure) {
        Objects.requireNonNull(failure);
        return () -> failure;
    }
}
