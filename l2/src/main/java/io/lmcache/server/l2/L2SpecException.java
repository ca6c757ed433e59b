package io.lmcache.server.l2;

/** An {@code --l2-adapter} value that breaks a rule; the message says which, in one line, quoting values clipped ({@link #clip}). */
public final class L2SpecException extends Exception {
    private static final long serialVersionUID = 1L;
    /** The wire-string rule of the server's log lines (its LogText, which this module cannot see): 64 characters a value. */
    static final int MAX_VALUE_CHARS = 64;
    /** A whole message: a value quoted inside (a JSON parser's) stays a line. */
    public static final int MAX_MESSAGE_CHARS = 300;

    public L2SpecException(String message) {
        super(clip(message, MAX_MESSAGE_CHARS));
    }

    /** A value as an error echoes it: at most {@link #MAX_VALUE_CHARS} characters, control characters as '?'. */
    public static String clip(Object value) {
        return clip(value, MAX_VALUE_CHARS);
    }

    /** {@code value} (its toString) clipped to {@code maxChars}, control characters as '?', the length said when clipped. */
    public static String clip(Object value, int maxChars) {
        String text = String.valueOf(value);
        int kept = Math.min(text.length(), maxChars);
        StringBuilder out = new StringBuilder(kept + 24);
        for (int i = 0; i < kept; i++) {
            char c = text.charAt(i);
            out.append(Character.isISOControl(c) ? '?' : c);
        }
        if (text.length() > maxChars) {
            out.append("...(").append(text.length()).append(" chars)");
        }
        return out.toString();
    }
}
