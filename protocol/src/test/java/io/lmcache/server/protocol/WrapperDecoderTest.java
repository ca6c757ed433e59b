package io.lmcache.server.protocol;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.charset.StandardCharsets;
import java.util.HexFormat;
import java.util.Random;
import org.junit.jupiter.api.Test;

/** The pickle allow-list and the length checks: hostile pickles are refused before anything is built. */
class WrapperDecoderTest {
    // pickle.dumps(obj) where obj.__reduce__ returns (os.system, ("echo pwned",)): protocol 4 (STACK_GLOBAL) and 2 (GLOBAL)
    private static final String P4_OS_SYSTEM = "80049525000000000000008c05706f736978948c0673797374656d9493948c0a6563686f2070776e656494859452942e";
    private static final String P2_OS_SYSTEM = "800263706f7369780a73797374656d0a7100580a0000006563686f2070776e656471018571025271032e";
    // builtins.bytearray: a global Pyrolite itself knows, still off our list
    private static final String P4_BYTEARRAY = "80049524000000000000008c086275696c74696e73948c09627974656172726179949394430361626394859452942e";
    // a CpuShmTensorWrapper pickled with protocol 5 (Python 3.14's default), dtype as a str, nbytes 2^40 (LONG1)
    private static final String P5_CPU_SHM =
            "800595dd000000000000008c1b6c6d63616368652e76312e706c6174666f726d2e6370752e73686d948c1343707553686d54656e736f72577261707065729493"
            + "942981947d94288c0873686d5f6e616d65948c0f2f6c6d63616368655f6b765f315f30948c066e6279746573948a060000000000018c0668616e646c65944e8c"
            + "056474797065948c07666c6f61743136948c05736861706594284b024b044b104b024b4074948c0673747269646594284d00204d00084b804b404b0174948c0e"
            + "73746f726167655f6f6666736574944b008c0b6465766963655f75756964948c036370759475622e";

    @Test
    void rejectsOsSystemThroughStackGlobal() {
        ProtocolException e = assertThrows(ProtocolException.class, () -> WrapperDecoder.decode(hex(P4_OS_SYSTEM)));
        assertEquals(ProtocolException.Reason.PICKLE_REJECTED, e.reason());
        assertTrue(e.getMessage().contains("posix.system"), e.getMessage());
    }

    @Test
    void rejectsOsSystemThroughGlobal() {
        ProtocolException e = assertThrows(ProtocolException.class, () -> WrapperDecoder.decode(hex(P2_OS_SYSTEM)));
        assertEquals(ProtocolException.Reason.PICKLE_REJECTED, e.reason());
        assertTrue(e.getMessage().contains("posix.system"), e.getMessage());
    }

    @Test
    void rejectsGlobalsPyroliteWouldOtherwiseConstruct() {
        ProtocolException e = assertThrows(ProtocolException.class, () -> WrapperDecoder.decode(hex(P4_BYTEARRAY)));
        assertEquals(ProtocolException.Reason.PICKLE_REJECTED, e.reason());
    }

    @Test
    void rejectsInst() {
        // protocol 0 INST: 'i' module '\n' name '\n' after a MARK
        byte[] pickle = "(ios\nsystem\n.".getBytes(StandardCharsets.US_ASCII);
        ProtocolException e = assertThrows(ProtocolException.class, () -> WrapperDecoder.decode(pickle));
        assertEquals(ProtocolException.Reason.PICKLE_REJECTED, e.reason());
    }

    @Test
    void rejectsDeclaredLengthsBeyondThePickle() {
        // BINBYTES8 declaring 2^40 bytes, then STOP: must fail without allocating a terabyte
        byte[] pickle = hex("80048e0000000000010000" + "2e");
        ProtocolException e = assertThrows(ProtocolException.class, () -> WrapperDecoder.decode(pickle));
        assertTrue(e.getMessage().contains("declares"), e.getMessage());
        // BINUNICODE declaring 0x7fffffff bytes
        byte[] unicode = hex("800458ffffff7f2e");
        assertThrows(ProtocolException.class, () -> WrapperDecoder.decode(unicode));
    }

    @Test
    void rejectsAPickleThatIsNotAWrapper() {
        byte[] tuple = hex("80044b014b0286942e"); // (1, 2)
        ProtocolException e = assertThrows(ProtocolException.class, () -> WrapperDecoder.decode(tuple));
        assertEquals(ProtocolException.Reason.BAD_PICKLE, e.reason());
    }

    @Test
    void acceptsProtocol5AndLargeIntegers() throws Exception {
        TensorWrapper.CpuShm shm = assertInstanceOf(TensorWrapper.CpuShm.class, WrapperDecoder.decode(hex(P5_CPU_SHM)));
        assertEquals("/lmcache_kv_1_0", shm.shmName());
        assertEquals(1L << 40, shm.nbytes());
        assertEquals(DType.FLOAT16, shm.dtype());
        assertArrayEquals(new long[] {2, 4, 16, 2, 64}, shm.shape());
        assertArrayEquals(new long[] {8192, 2048, 128, 64, 1}, shm.stride());
    }

    @Test
    void garbageIsABadPickleNotACrash() {
        Random random = new Random(42);
        for (int i = 0; i < 2000; i++) {
            byte[] junk = new byte[random.nextInt(64)];
            random.nextBytes(junk);
            if (junk.length > 1) {
                junk[0] = (byte) 0x80;
                junk[1] = 4;
            }
            assertThrows(ProtocolException.class, () -> WrapperDecoder.decode(junk));
        }
    }

    private static byte[] hex(String hex) {
        return HexFormat.of().parseHex(hex);
    }
}
