package io.lmcache.server.l2.s3;

import java.nio.ByteBuffer;
import java.util.Optional;
import org.reactivestreams.Subscriber;
import org.reactivestreams.Subscription;
import software.amazon.awssdk.core.async.AsyncRequestBody;

/**
 * A PUT body streamed from a lent L1 buffer in {@link #CHUNK_BYTES} chunks, each copied only when the client asks for it: the value
 * is never copied whole, and a request still running after its key answered fails instead of reading a buffer given back. Each
 * subscription starts at offset 0 (the client may subscribe again to sign or to resend).
 */
final class SegmentBody implements AsyncRequestBody {
    static final int CHUNK_BYTES = 256 * 1024;

    private final LentSegment source;

    SegmentBody(LentSegment source) {
        this.source = source;
    }

    @Override
    public Optional<Long> contentLength() {
        return Optional.of(source.size());
    }

    @Override
    public String contentType() {
        return "application/octet-stream";
    }

    @Override
    public void subscribe(Subscriber<? super ByteBuffer> subscriber) {
        subscriber.onSubscribe(new Chunks(subscriber));
    }

    /** One subscription: emits on the thread that requests, never re-entering {@code onNext} from inside it. */
    private final class Chunks implements Subscription {
        private final Subscriber<? super ByteBuffer> subscriber;
        private long offset;
        private long demand;
        private boolean emitting;
        private boolean done;

        Chunks(Subscriber<? super ByteBuffer> subscriber) {
            this.subscriber = subscriber;
        }

        @Override
        public void request(long n) {
            synchronized (this) {
                if (done) {
                    return;
                }
                if (n <= 0) {
                    done = true;
                } else {
                    demand = demand + n < 0 ? Long.MAX_VALUE : demand + n;
                    if (emitting) {
                        return;
                    }
                    emitting = true;
                }
            }
            if (n <= 0) {
                subscriber.onError(new IllegalArgumentException("rule 3.9: request(" + n + ")"));
                return;
            }
            emit();
        }

        private void emit() {
            while (true) {
                ByteBuffer chunk;
                synchronized (this) {
                    if (done) {
                        return;
                    }
                    if (offset >= source.size()) {
                        done = true;
                        chunk = null;
                    } else if (demand == 0) {
                        emitting = false;
                        return;
                    } else {
                        int length = (int) Math.min(CHUNK_BYTES, source.size() - offset);
                        chunk = source.copyOut(offset, length);
                        if (chunk == null) {
                            done = true;
                        } else {
                            offset += length;
                            demand--;
                        }
                    }
                }
                if (chunk == null && offset >= source.size()) {
                    subscriber.onComplete();
                    return;
                }
                if (chunk == null) {
                    subscriber.onError(new IllegalStateException("the L2 buffer was given back before its PUT was sent"));
                    return;
                }
                subscriber.onNext(chunk);
            }
        }

        @Override
        public synchronized void cancel() {
            done = true;
        }
    }
}
