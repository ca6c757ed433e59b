package io.lmcache.server.protocol;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.util.HexFormat;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;
import org.junit.jupiter.api.Test;

/**
 * {@code VmmCudaIPCWrapper} pickles as Python's pickle writes them (protocol 4, {@code handle} a memo reference to
 * {@code _export_id}), from the module paths of newest-clients.md §1.3: made by a stand-in class with LMCache's
 * {@code __getstate__} (testdata in src/test/resources/pickles).
 */
class VmmWrapperDecodeTest {
    private static byte[] pickle(String name) throws IOException {
        try (InputStream in = VmmWrapperDecodeTest.class.getResourceAsStream("/pickles/" + name + ".hex")) {
            return HexFormat.of().parseHex(new String(in.readAllBytes(), StandardCharsets.US_ASCII).strip());
        }
    }

    @ParameterizedTest
    @CsvSource({"vmm-devices-fabric", "vmm-cuda-fabric"})
    void aFabricWrapperOfEitherModuleDecodes(String name) throws Exception {
        TensorWrapper.VmmCudaIpc vmm = assertInstanceOf(TensorWrapper.VmmCudaIpc.class, WrapperDecoder.decode(pickle(name)));
        assertEquals(TensorWrapper.VmmKind.FABRIC, vmm.kind());
        assertEquals(64, vmm.fabricHandle().length);
        assertEquals(100, vmm.fabricHandle()[0]);
        assertEquals(16, vmm.exportId().length);
        assertEquals(2 << 20, vmm.allocSize());
        assertEquals(4096, vmm.allocOffset());
        assertEquals(8192, vmm.nbytes());
        assertEquals(DType.BFLOAT16, vmm.dtype());
        assertArrayEquals(new long[] {2, 16, 8, 16}, vmm.shape());
        assertArrayEquals(new long[] {2048, 128, 16, 1}, vmm.stride());
        assertEquals("GPU-12345678-1234-1234-1234-123456789abc", vmm.deviceUuid());
    }

    @ParameterizedTest
    @CsvSource({"vmm-devices-posix_fd", "vmm-cuda-posix_fd"})
    void aPosixFdWrapperDecodesWithoutAHandle(String name) throws Exception {
        TensorWrapper.VmmCudaIpc vmm = assertInstanceOf(TensorWrapper.VmmCudaIpc.class, WrapperDecoder.decode(pickle(name)));
        assertEquals(TensorWrapper.VmmKind.POSIX_FD, vmm.kind());
        assertEquals(0, vmm.fabricHandle().length);
    }

    @Test
    void aWrapperClassFromAnUnknownModuleIsRejected() throws Exception {
        String hex = HexFormat.of().formatHex(pickle("vmm-cuda-fabric"));
        // same length module name: lmcache.v1.platform.cuda.ipc_wrapper -> lmcache.v1.platform.evil.ipc_wrapper
        String evil = hex.replace(HexFormat.of().formatHex("platform.cuda.".getBytes(StandardCharsets.US_ASCII)),
                HexFormat.of().formatHex("platform.evil.".getBytes(StandardCharsets.US_ASCII)));
        ProtocolException e = assertThrows(ProtocolException.class, () -> WrapperDecoder.decode(HexFormat.of().parseHex(evil)));
        assertEquals(ProtocolException.Reason.PICKLE_REJECTED, e.reason());
    }

    @Test
    void anOffsetBeyondItsChunkIsABadPickle() throws Exception {
        String hex = HexFormat.of().formatHex(pickle("vmm-cuda-fabric"));
        // _alloc_offset BININT2 4096 (4d0010) -> BININT (4a) 0x7fff0000, beyond the 2 MiB chunk
        String key = HexFormat.of().formatHex("_alloc_offset".getBytes(StandardCharsets.US_ASCII)) + "94";
        int at = hex.indexOf(key) + key.length();
        assertEquals("4d0010", hex.substring(at, at + 6));
        byte[] patched = HexFormat.of().parseHex(hex.substring(0, at) + "4a0000ff7f" + hex.substring(at + 6));
        // the frame length in the header no longer matches: protocol 4 frames are advisory for Pyrolite
        ProtocolException e = assertThrows(ProtocolException.class, () -> WrapperDecoder.decode(patched));
        assertEquals(ProtocolException.Reason.BAD_PICKLE, e.reason());
    }
}
