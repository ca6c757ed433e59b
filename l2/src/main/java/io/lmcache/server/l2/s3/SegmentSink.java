package io.lmcache.server.l2.s3;

import java.nio.ByteBuffer;
import java.util.concurrent.CompletableFuture;
import org.reactivestreams.Subscriber;
import org.reactivestreams.Subscription;
import software.amazon.awssdk.core.async.AsyncResponseTransformer;
import software.amazon.awssdk.core.async.SdkPublisher;
import software.amazon.awssdk.services.s3.model.GetObjectResponse;

/**
 * A GET body written at its offsets straight into a lent L1 buffer (LMCache writes the body into the object the same way). The
 * answer's {@code Content-Length} must equal the buffer's size before any byte is copied, else the body is not read at all (a
 * larger object planted under the name costs no transfer); a body that ends short or runs long is a miss too.
 */
final class SegmentSink implements AsyncResponseTransformer<GetObjectResponse, SegmentSink.Outcome> {
    /** What a GET left in the buffer. */
    enum Outcome { LOADED, WRONG_SIZE, SHORT_BODY }

    private final LentSegment target;
    private volatile CompletableFuture<Outcome> result;
    private volatile boolean wrongSize;

    SegmentSink(LentSegment target) {
        this.target = target;
    }

    @Override
    public CompletableFuture<Outcome> prepare() {
        result = new CompletableFuture<>();
        wrongSize = false;
        return result;
    }

    @Override
    public void onResponse(GetObjectResponse response) {
        Long length = response.contentLength();
        wrongSize = length == null || length != target.size();
    }

    @Override
    public void onStream(SdkPublisher<ByteBuffer> publisher) {
        CompletableFuture<Outcome> future = result;
        if (wrongSize) {
            future.complete(Outcome.WRONG_SIZE);
            publisher.subscribe(new Subscriber<ByteBuffer>() {
                @Override
                public void onSubscribe(Subscription subscription) {
                    subscription.cancel();
                }

                @Override
                public void onNext(ByteBuffer part) {
                }

                @Override
                public void onError(Throwable error) {
                }

                @Override
                public void onComplete() {
                }
            });
            return;
        }
        publisher.subscribe(new Subscriber<ByteBuffer>() {
            private Subscription subscription;
            private long offset;

            @Override
            public void onSubscribe(Subscription s) {
                subscription = s;
                s.request(1);
            }

            @Override
            public void onNext(ByteBuffer part) {
                int length = part.remaining();
                if (!target.copyIn(offset, part)) {
                    subscription.cancel();
                    future.complete(Outcome.SHORT_BODY); // ran past the size it announced, or answered already
                    return;
                }
                offset += length;
                subscription.request(1);
            }

            @Override
            public void onError(Throwable error) {
                future.completeExceptionally(error);
            }

            @Override
            public void onComplete() {
                future.complete(offset == target.size() ? Outcome.LOADED : Outcome.SHORT_BODY);
            }
        });
    }

    @Override
    public void exceptionOccurred(Throwable error) {
        CompletableFuture<Outcome> future = result;
        if (future != null) {
            future.completeExceptionally(error);
        }
    }
}
