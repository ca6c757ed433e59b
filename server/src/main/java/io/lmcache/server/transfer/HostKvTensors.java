package io.lmcache.server.transfer;

import io.lmcache.server.protocol.TensorWrapper;
import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.nio.file.attribute.BasicFileAttributes;
import java.util.List;

/**
 * A CPU worker's KV tensors: POSIX shared-memory segments ({@code /dev/shm/<name>}) mapped once
 * at registration. The client unlinks its segments when its process exits, so before each transfer
 * {@link #checkAlive()} confirms every segment is still the one we mapped and still long enough
 * (a truncated segment would fault a copy): a dead worker's transfer fails instead of touching
 * memory nobody owns any more.
 */
public final class HostKvTensors implements AutoCloseable {
    static final Path SHM_DIR = Path.of("/dev/shm");

    private record Mapped(Path path, Object fileKey, long nbytes, MemorySegment segment) {}

    private final Arena arena;
    private final Mapped[] tensors;

    private HostKvTensors(Arena arena, Mapped[] tensors) {
        this.arena = arena;
        this.tensors = tensors;
    }

    /** Maps every tensor's segment; fails (mapping nothing) when one is missing or too small. */
    public static HostKvTensors map(List<TensorWrapper.CpuShm> wrappers) throws LayoutException {
        Arena arena = Arena.ofShared();
        Mapped[] mapped = new Mapped[wrappers.size()];
        try {
            for (int i = 0; i < mapped.length; i++) {
                TensorWrapper.CpuShm wrapper = wrappers.get(i);
                String name = wrapper.shmName().startsWith("/") ? wrapper.shmName().substring(1) : wrapper.shmName();
                if (name.isEmpty() || name.contains("/") || name.equals("..")) {
                    throw new LayoutException("tensor " + i + ": invalid shared-memory name '" + wrapper.shmName() + "'");
                }
                Path path = SHM_DIR.resolve(name);
                try (FileChannel channel = FileChannel.open(path, StandardOpenOption.READ, StandardOpenOption.WRITE)) {
                    long size = channel.size();
                    if (size < wrapper.nbytes()) {
                        throw new LayoutException("tensor " + i + ": segment " + path + " has " + size + " bytes, the wrapper says " + wrapper.nbytes());
                    }
                    Object fileKey = Files.readAttributes(path, BasicFileAttributes.class).fileKey();
                    mapped[i] = new Mapped(path, fileKey, wrapper.nbytes(), channel.map(FileChannel.MapMode.READ_WRITE, 0, wrapper.nbytes(), arena));
                } catch (NoSuchFileException e) {
                    throw new LayoutException("tensor " + i + ": shared-memory segment " + path + " does not exist (the worker's "
                            + "process may be gone, or it runs in another IPC namespace: share /dev/shm with the server)");
                } catch (IOException e) {
                    throw new LayoutException("tensor " + i + ": cannot map " + path + ": " + e.getMessage());
                }
            }
        } catch (LayoutException | RuntimeException e) {
            arena.close();
            throw e;
        }
        return new HostKvTensors(arena, mapped);
    }

    public MemorySegment tensor(int index) {
        return tensors[index].segment();
    }

    public int count() {
        return tensors.length;
    }

    /** Null when the mappings still reach the worker's memory, else why not (segment deleted, replaced, truncated). */
    public String checkAlive() {
        for (Mapped tensor : tensors) {
            try {
                BasicFileAttributes attributes = Files.readAttributes(tensor.path(), BasicFileAttributes.class);
                if (!tensor.fileKey().equals(attributes.fileKey())) {
                    return "segment " + tensor.path() + " was replaced after registration";
                }
                if (attributes.size() < tensor.nbytes()) {
                    return "segment " + tensor.path() + " was truncated to " + attributes.size() + " bytes";
                }
            } catch (NoSuchFileException e) {
                return "segment " + tensor.path() + " was deleted after registration (the worker is gone)";
            } catch (IOException e) {
                return "segment " + tensor.path() + ": " + e.getMessage();
            }
        }
        return null;
    }

    /** Unmaps; called once, by the release thread, after the last transfer using the tensors has finished. */
    @Override
    public void close() {
        arena.close();
    }
}
