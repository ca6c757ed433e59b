package io.lmcache.server;

/** A close step with a name, so a failing one is named in the shutdown log rather than shown as a lambda. */
record NamedCloser(String name, AutoCloseable closer) implements AutoCloseable {
    @Override
    public void close() throws Exception {
        closer.close();
    }

    @Override
    public String toString() {
        return name;
    }
}
