package io.lmcache.server.l2;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;
import org.junit.jupiter.api.Test;

class L2AdapterSpecsTest {
    private static String error(String json) {
        return assertThrows(L2SpecException.class, () -> L2AdapterSpecs.parse(json)).getMessage();
    }

    @Test
    void fsNativeDefaultsAndSettings() throws Exception {
        FsNativeSpec plain = (FsNativeSpec) L2AdapterSpecs.parse("{\"type\":\"fs_native\",\"base_path\":\"/data/l2\"}");
        assertEquals(new FsNativeSpec("/data/l2", 4, 4, "", false, 0, true, null, List.of()), plain);
        FsNativeSpec full = (FsNativeSpec) L2AdapterSpecs.parse("{\"type\":\"fs_native\",\"base_path\":\"/d\","
                + "\"num_workers\":2,\"relative_tmp_dir\":\"tmp\",\"use_odirect\":true,\"max_capacity_gb\":1.5,\"persist_enabled\":false,"
                + "\"eviction\":{\"eviction_policy\":\"LRU\",\"trigger_watermark\":0.9,\"eviction_ratio\":0.1},\"read_ahead_size\":4096}");
        FsNativeSpec readers = (FsNativeSpec) L2AdapterSpecs.parse("{\"type\":\"fs_native\",\"base_path\":\"/d\","
                + "\"read_io_depth\":16}");
        assertEquals(16, readers.readWorkers());
        assertEquals(List.of(), readers.warnings(), "read_io_depth is the read pool's size now, not ignored");
        assertEquals(2, full.numWorkers());
        assertEquals(2, full.readWorkers(), "read_io_depth 0 (unset): as many readers as num_workers, in a pool of their own");
        assertEquals((long) (1.5 * (1L << 30)), full.maxCapacityBytes());
        assertEquals(new L2AdapterSpec.EvictionSpec(true, 0.9, 0.1), full.eviction());
        assertEquals(1, full.warnings().size(), "read_ahead_size has no effect here: " + full.warnings());
    }

    @Test
    void faultInjectWrapsItsInnerSpec() throws Exception {
        FaultInjectSpec fault = (FaultInjectSpec) L2AdapterSpecs.parse("{\"type\":\"fault_inject\",\"rate\":0.25,"
                + "\"seed\":-3,\"gap_indices\":[4,0],\"gap_tail_ratios\":[0.5,1],\"inner\":{\"type\":\"fs_native\",\"base_path\":\"/x\","
                + "\"max_capacity_gb\":1,\"eviction\":{}}}");
        assertEquals(0.25, fault.rules().rate());
        assertEquals(-3, fault.rules().seed());
        assertEquals(List.of(0, 4), List.copyOf(fault.rules().gapIndices()));
        assertEquals(List.of(0.5, 1.0), fault.rules().gapTailRatios());
        assertEquals(new L2AdapterSpec.EvictionSpec(true, 0.8, 0.2), fault.eviction(), "the inner adapter's eviction");
        FaultInjectSpec passThrough = (FaultInjectSpec) L2AdapterSpecs.parse(
                "{\"type\":\"fault_inject\",\"inner\":{\"type\":\"fs_native\",\"base_path\":\"/x\"}}");
        assertEquals(0.0, passThrough.rules().rate());
        assertNull(passThrough.eviction());
    }

    @Test
    void badValuesAreRefusedWithOneLine() {
        assertTrue(error("{\"type\":").startsWith("not valid JSON: "));
        assertEquals("must be a JSON object with a \"type\", e.g. {\"type\":\"fs_native\",\"base_path\":\"/data/l2\"}", error("[1]"));
        assertEquals("unknown type 'nixl_store' (known: fs_native, fault_inject, resp, valkey, s3)", error("{\"type\":\"nixl_store\"}"));
        assertEquals("needs a string \"type\" (one of fs_native, fault_inject, resp, valkey, s3)", error("{\"base_path\":\"/x\"}"));
        assertEquals("fs_native: \"base_path\" is required (a directory, created if missing)", error("{\"type\":\"fs_native\"}"));
        assertEquals("fs_native: unknown key \"base\"", error("{\"type\":\"fs_native\",\"base\":\"/x\"}"));
        assertTrue(error("{\"type\":\"fs_native\",\"base_path\":\"/x\",\"relative_tmp_dir\":\"../up\"}").contains("relative_tmp_dir"));
        assertTrue(error("{\"type\":\"fs_native\",\"base_path\":\"/x\",\"num_workers\":0}").contains("num_workers"));
        assertTrue(error("{\"type\":\"fs_native\",\"base_path\":\"/x\",\"eviction\":{\"eviction_policy\":\"ARC\"}}").contains("LRU or noop"));
        String inner = ",\"inner\":{\"type\":\"fs_native\",\"base_path\":\"/x\"}}";
        assertEquals("fault_inject: rate must be a number in [0, 1], got 1.5", error("{\"type\":\"fault_inject\",\"rate\":1.5" + inner));
        assertEquals("fault_inject: rate must be a number in [0, 1], got true", error("{\"type\":\"fault_inject\",\"rate\":true" + inner));
        assertEquals("fault_inject: seed must be an integer, got true", error("{\"type\":\"fault_inject\",\"seed\":true" + inner));
        assertTrue(error("{\"type\":\"fault_inject\",\"gap_indices\":[-1]" + inner).contains("non-negative"));
        assertTrue(error("{\"type\":\"fault_inject\",\"gap_tail_ratios\":[2]" + inner).contains("[0, 1]"));
        assertEquals("fault_inject: 'inner' must be an adapter spec object with a 'type' field", error("{\"type\":\"fault_inject\"}"));
        assertEquals("fault_inject inner: unknown type 'x' (known: fs_native, fault_inject, resp, valkey, s3)",
                error("{\"type\":\"fault_inject\",\"inner\":{\"type\":\"x\"}}"));
    }

    @Test
    void trailingDataIsRefusedAndEchoedValuesAreClipped() {
        String fs = "{\"type\":\"fs_native\",\"base_path\":\"/d\"}";
        assertTrue(error(fs + ",{\"type\":\"resp\",\"host\":\"h\",\"port\":1}").startsWith("trailing data after the JSON object"));
        assertTrue(error(fs + " {}").startsWith("trailing data"));
        assertTrue(error(fs + " x").startsWith("trailing data"));
        assertTrue(error("{\"type\":").startsWith("not valid JSON"));
        String huge = "y".repeat(40_000); // under Jackson's 50 000-character limit on a name
        for (String json : List.of("{\"type\":\"" + huge + "\"}", "{\"type\":\"fs_native\",\"base_path\":\"/d\",\"" + huge + "\":1}",
                "{\"type\":\"fs_native\",\"base_path\":\"/d\",\"num_workers\":\"" + huge + "\"}")) {
            String message = error(json);
            assertTrue(message.length() < 200 && message.matches(".*\\.\\.\\.\\(4000[0-9] chars\\).*"), message);
        }
    }
}
