package io.lmcache.server.cuda;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.FileTime;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.Test;

/** JCuda's native library is unpacked into a directory of this process's own, never into the shared temporary directory. */
class NativeLibraryDirTest {
    private static final String TMPDIR = "java.io.tmpdir";

    @Test
    void theLoadSeesAPrivateDirectoryThatIsGoneAfterwards() throws IOException {
        String shared = System.getProperty(TMPDIR);
        Path planted = Path.of(shared, "libJCudaDriver-test-" + ProcessHandle.current().pid() + ".so");
        Files.writeString(planted, "not a library");
        AtomicReference<Path> seen = new AtomicReference<>();
        try {
            NativeLibraryDir.loadPrivately(() -> {
                Path dir = Path.of(System.getProperty(TMPDIR));
                seen.set(dir);
                try {
                    assertEquals("rwx------", PosixFilePermissions.toString(Files.getPosixFilePermissions(dir)));
                    assertFalse(Files.exists(dir.resolve(planted.getFileName())), "what another user planted is not there");
                    Files.writeString(dir.resolve(planted.getFileName()), "the unpacked library");
                } catch (IOException e) {
                    throw new UncheckedIOException(e);
                }
            });
            assertNotEquals(shared, seen.get().toString());
            assertEquals(shared, System.getProperty(TMPDIR), "restored");
            assertFalse(Files.exists(seen.get()), "the private directory is deleted once the library is loaded");
            assertEquals("not a library", Files.readString(planted), "the shared file was neither used nor replaced");
        } finally {
            Files.deleteIfExists(planted);
        }
    }

    @Test
    void aFailedLoadAlsoCleansUpAndRestores() {
        String shared = System.getProperty(TMPDIR);
        AtomicReference<Path> seen = new AtomicReference<>();
        assertThrows(UnsatisfiedLinkError.class, () -> NativeLibraryDir.loadPrivately(() -> {
            seen.set(Path.of(System.getProperty(TMPDIR)));
            throw new UnsatisfiedLinkError("no libcuda");
        }));
        assertEquals(shared, System.getProperty(TMPDIR));
        assertFalse(Files.exists(seen.get()));
    }

    @Test
    void openingCudaLeavesNothingInTheSharedTemporaryDirectory() throws IOException {
        Path shared = Path.of(System.getProperty(TMPDIR), "libJCudaDriver-12.6.0-linux-x86_64.so");
        FileTime before = Files.exists(shared) ? Files.getLastModifiedTime(shared) : null;
        try {
            CudaDevices.open(0).close();
        } catch (CudaException e) {
            // no GPU here: the library was unpacked and its load failed, the point is where it was unpacked
            assertTrue(e.getMessage().contains("cannot be loaded") || e.getMessage().contains("no GPU") || e.getMessage().contains("cuInit"),
                    e.getMessage());
        }
        if (before == null) {
            assertFalse(Files.exists(shared), "JCuda wrote its library into the shared temporary directory");
        } else {
            assertEquals(before, Files.getLastModifiedTime(shared), "an existing file of that name was not rewritten");
        }
    }
}
