package io.lmcache.server.protocol;

import io.lmcache.server.protocol.ProtocolException.Reason;

/**
 * The payload frames of one request, each read at most once, each checked to end after its value.
 * One per decoder, reset per request: decoding allocates no cursor.
 */
final class Payloads {
    private final MsgpackReader reader = new MsgpackReader();
    private byte[][] frames;
    private int from;
    private int count;
    private int open = -1;

    Payloads open(byte[][] frames, int from, int to) {
        this.frames = frames;
        this.from = from;
        this.count = to - from;
        this.open = -1;
        reader.clearFieldsRead();
        return this;
    }

    boolean has(int index) {
        return index < count;
    }

    MsgpackReader require(int index, String what) throws ProtocolException {
        if (index >= count) {
            throw new ProtocolException(Reason.MISSING_FRAMES, what + ": payload frame " + index + " is missing (got " + count + ")");
        }
        return reader(index);
    }

    /** Opens frame {@code index}; the previously opened frame must have been read to its end. */
    MsgpackReader reader(int index) throws ProtocolException {
        closeOpen();
        open = index;
        return reader.reset(frames[from + index]);
    }

    int optionalInt(int index, String what, int fallback) throws ProtocolException {
        if (!has(index)) {
            return fallback;
        }
        MsgpackReader r = reader(index);
        return r.tryReadNil(what) ? fallback : r.readInt(what);
    }

    /** The {@link WireField}s this request's frames read so far, by ordinal. */
    long fieldsRead() {
        return reader.fieldsRead();
    }

    /** Checks the last frame read ended after its value, and hands back the decoded request. */
    <R extends Request> R end(R request) throws ProtocolException {
        closeOpen();
        frames = null;
        return request;
    }

    private void closeOpen() throws ProtocolException {
        if (open >= 0) {
            reader.expectEnd("payload frame " + open);
            open = -1;
        }
    }
}
