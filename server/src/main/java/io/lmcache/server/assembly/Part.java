package io.lmcache.server.assembly;

import java.util.List;

/**
 * One part of the server (LMCache's {@code DiscoverableModule}): a name, the parts it must come after (each edge with its
 * reason), and how it opens its object from what the parts before it opened. Whether it applies is its own decision:
 * {@link #open} returns null when it is switched off, and the parts that need it ask {@link Build#optional}.
 *
 * @param <T> what the part opens (a module, a tier, a runner, or a record of several)
 */
public interface Part<T> {
    /** Why a part comes after another: opened after it, closed before it. */
    record After(String part, String why) {}

    String name();

    /** The parts this one is opened after and closed before, with the reason of each edge. */
    List<After> after();

    /** Opens the part (registering its closers, agents and status through {@code build}), or returns null when it is off. */
    T open(Build build);

    /** A part from its name, its edges and its opener. */
    static <T> Part<T> of(String name, List<After> after, Opener<T> opener) {
        return new Simple<>(name, List.copyOf(after), opener);
    }

    /** An edge: after {@code part}, because {@code why}. */
    static After after(String part, String why) {
        return new After(part, why);
    }

    @FunctionalInterface
    interface Opener<T> {
        T open(Build build);
    }

    /** The part {@link #of} makes. */
    record Simple<T>(String name, List<After> after, Opener<T> opener) implements Part<T> {
        @Override
        public T open(Build build) {
            return opener.open(build);
        }
    }
}
