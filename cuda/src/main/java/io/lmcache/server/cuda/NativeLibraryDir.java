package io.lmcache.server.cuda;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.stream.Stream;

/**
 * Where JCuda's native library is unpacked. JCuda writes it to {@code java.io.tmpdir} under a fixed
 * name and loads whatever file already has that name, so in a shared {@code /tmp} another user could
 * plant a library there first. The load runs with {@code java.io.tmpdir} pointing at a fresh
 * directory only this process's user can enter (0700); once loaded, the library stays mapped and the
 * directory is deleted.
 */
final class NativeLibraryDir {
    private static final String TMPDIR = "java.io.tmpdir";

    private NativeLibraryDir() {}

    /** Runs {@code load} (the first touch of a JCuda class) with a private temporary directory. */
    static synchronized void loadPrivately(Runnable load) {
        String shared = System.getProperty(TMPDIR);
        Path dir;
        try {
            dir = Files.createTempDirectory(Path.of(shared), "lmcache-native-",
                    PosixFilePermissions.asFileAttribute(PosixFilePermissions.fromString("rwx------")));
        } catch (IOException e) {
            throw new UncheckedIOException("cannot create a private directory for JCuda's native library in " + shared, e);
        }
        System.setProperty(TMPDIR, dir.toString());
        try {
            load.run();
        } finally {
            System.setProperty(TMPDIR, shared);
            deleteAll(dir);
        }
    }

    private static void deleteAll(Path dir) {
        try (Stream<Path> files = Files.list(dir)) {
            for (Path file : files.toList()) {
                Files.deleteIfExists(file);
            }
            Files.deleteIfExists(dir);
        } catch (IOException e) {
            // a loaded library's file can go while it is mapped; a leftover private directory harms nobody
            dir.toFile().deleteOnExit();
        }
    }
}
