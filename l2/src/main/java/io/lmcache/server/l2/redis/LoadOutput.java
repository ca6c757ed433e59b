package io.lmcache.server.l2.redis;

import io.lettuce.core.output.CommandOutput;
import java.nio.ByteBuffer;

/** A GET's reply, copied into its caller's buffer as it is decoded; a nil or a reply of another length is no hit. */
final class LoadOutput extends CommandOutput<String, LentBuffer, LoadOutput.Outcome> {
    /** LATE: the reply came after the task had answered (its buffer was given back). */
    enum Outcome { HIT, MISSING, WRONG_SIZE, LATE }

    private final LentBuffer target;

    LoadOutput(LentBuffer target) {
        super(ValueCodec.INSTANCE, Outcome.MISSING);
        this.target = target;
    }

    @Override
    public void set(ByteBuffer bytes) {
        if (bytes == null) {
            output = Outcome.MISSING;
        } else if (bytes.remaining() != target.size()) {
            output = Outcome.WRONG_SIZE;
        } else {
            output = target.readFrom(bytes) ? Outcome.HIT : Outcome.LATE;
        }
    }
}
