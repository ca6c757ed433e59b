package io.lmcache.server.protocol;

/**
 * A request that cannot be decoded. {@link #reason()} is a stable label for counters; the message
 * says what was wrong, for the log line.
 */
public final class ProtocolException extends Exception {
    private static final long serialVersionUID = 1L;

    /** Counter labels; one per kind of bad input. */
    public enum Reason {
        MALFORMED_MSGPACK("malformed_msgpack"),
        WRONG_TYPE("wrong_type"),
        MISSING_FRAMES("missing_frames"),
        OVERSIZED("oversized"),
        BAD_EXTENSION("bad_extension"),
        PICKLE_REJECTED("pickle_rejected"),
        BAD_PICKLE("bad_pickle"),
        BAD_VALUE("bad_value"),
        /** A cache salt LMCache's {@code ObjectKey} refuses ({@code @ / \\} or NUL, or over 128 characters). */
        BAD_SALT("bad_salt"),
        /** A {@code lmcache.tag.*} request config LMCache refuses (docs/source/mp/request_tags.rst). */
        BAD_TAG("bad_tag"),
        /** A field longer than its {@link WireField} limit ({@link #field()} says which). */
        OVER_LIMIT("over_limit");

        private final String label;

        Reason(String label) {
            this.label = label;
        }

        public String label() {
            return label;
        }
    }

    private final Reason reason;
    private final WireField field;

    public ProtocolException(Reason reason, String message) {
        super(message, null, false, false);
        this.reason = reason;
        this.field = null;
    }

    /** A value of {@code field} whose msgpack header declares {@code declared} bytes, elements or entries: over the limit. */
    public ProtocolException(WireField field, long declared) {
        super(field.wireName() + ": declares " + declared + " " + field.kind().unit() + ", over its limit of " + field.max(), null,
                false, false);
        this.reason = Reason.OVER_LIMIT;
        this.field = field;
    }

    public Reason reason() {
        return reason;
    }

    /** The field past its limit ({@link Reason#OVER_LIMIT}); null for any other reason. */
    public WireField field() {
        return field;
    }
}
