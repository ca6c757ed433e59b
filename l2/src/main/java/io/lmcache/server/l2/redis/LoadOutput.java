package io.lmcache.server.l2.redis;

import io.lettuce.core.output.CommandOutput;
import java.nio.ByteBuffer;

/**
 * A GETRANGE 0..size reply (at most one byte more than the object), copied into its caller's buffer as it is decoded: an empty
 * reply is a missing key (objects are never empty), one byte more a larger value refused unread, another length no hit either.
 */
final class LoadOutput extends CommandOutput<String, LentBuffer, LoadOutput.Outcome> {
    /** LATE: the reply came after the task had answered (its buffer was given back). TOO_BIG: the stored value is larger. */
    enum Outcome { HIT, MISSING, WRONG_SIZE, TOO_BIG, LATE }

    private final LentBuffer target;

    LoadOutput(LentBuffer target) {
        super(ValueCodec.INSTANCE, Outcome.MISSING);
        this.target = target;
    }

    @Override
    public void set(ByteBuffer bytes) {
        if (bytes == null || !bytes.hasRemaining()) {
            output = Outcome.MISSING;
        } else if (bytes.remaining() > target.size()) {
            output = Outcome.TOO_BIG;
        } else if (bytes.remaining() != target.size()) {
            output = Outcome.WRONG_SIZE;
        } else {
            output = target.readFrom(bytes) ? Outcome.HIT : Outcome.LATE;
        }
    }
}
