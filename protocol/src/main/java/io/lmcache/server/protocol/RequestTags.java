package io.lmcache.server.protocol;

import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;

/**
 * A request's cache identity tags: LMCache's {@code request_configs} entries {@code lmcache.tag.<name>}
 * (docs/source/mp/request_tags.rst, LMCache PR 4280). They are part of every key, next to the cache salt,
 * so a lookup reuses an entry only when its complete tag set equals the one it was stored with, and an
 * untagged request never meets a tagged one. LMCache sorts the tags before they enter the key, so the
 * order of the request's map does not matter; so do we ({@link #of}).
 *
 * <p>The rules are LMCache's: the value must be a string, and name and value are at most
 * {@value #MAX_CHARS} characters (Python's {@code len}: code points) without {@code @ % / \} or NUL.
 * LMCache refuses a key that breaks them (its key constructor raises), so the request fails; the
 * decoder does the same ({@link ProtocolException.Reason#BAD_TAG}). {@value #MAX_TAGS} tags per request
 * is our own bound (input is hostile); LMCache has none.
 *
 * @param tags name-sorted (by code point, as Python sorts strings), names distinct
 */
public record RequestTags(List<Tag> tags) {
    /** The {@code request_configs} key prefix that makes an entry a tag. */
    public static final String PREFIX = "lmcache.tag.";
    public static final int MAX_CHARS = 128;
    public static final int MAX_TAGS = 64;
    public static final RequestTags NONE = new RequestTags(List.of());
    private static final Comparator<String> CODE_POINTS = (a, b) -> {
        int i = 0;
        int j = 0;
        while (i < a.length() && j < b.length()) {
            int ca = a.codePointAt(i);
            int cb = b.codePointAt(j);
            if (ca != cb) {
                return Integer.compare(ca, cb);
            }
            i += Character.charCount(ca);
            j += Character.charCount(cb);
        }
        return Boolean.compare(i < a.length(), j < b.length());
    };

    /** One tag: its name (without {@link #PREFIX}) and value. */
    public record Tag(String name, String value) {}

    public RequestTags {
        tags = List.copyOf(tags);
    }

    /** The tags of {@code unsorted}, sorted as LMCache sorts them; checks nothing (see {@link #problem}). */
    public static RequestTags of(List<Tag> unsorted) {
        if (unsorted.isEmpty()) {
            return NONE;
        }
        List<Tag> sorted = new ArrayList<>(unsorted);
        sorted.sort(Comparator.comparing(Tag::name, CODE_POINTS).thenComparing(Tag::value, CODE_POINTS));
        return new RequestTags(sorted);
    }

    public boolean isEmpty() {
        return tags.isEmpty();
    }

    /** Why a tag name or value breaks LMCache's rules, or null when it keeps them. */
    public static String problem(String what, String text) {
        if (text.codePointCount(0, text.length()) > MAX_CHARS) {
            return what + " is longer than " + MAX_CHARS + " characters";
        }
        for (int i = 0; i < text.length(); i++) {
            char c = text.charAt(i);
            if (c == '@' || c == '%' || c == '/' || c == '\\' || c == 0) {
                return what + " contains '" + (c == 0 ? "NUL" : String.valueOf(c)) + "'";
            }
        }
        return null;
    }

    /**
     * One string that names the tag set and nothing else, for the store's identity: {@code name%value} pairs joined by
     * {@code %}, which neither names nor values may contain, so two tag sets never give the same string; "" without tags.
     */
    public String identity() {
        if (tags.isEmpty()) {
            return "";
        }
        StringBuilder out = new StringBuilder();
        for (Tag tag : tags) {
            if (!out.isEmpty()) {
                out.append('%');
            }
            out.append(tag.name()).append('%').append(tag.value());
        }
        return out.toString();
    }

    @Override
    public String toString() {
        return identity();
    }
}
