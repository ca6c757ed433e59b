package io.lmcache.server.it;

import static org.awaitility.Awaitility.await;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.lmcache.server.testing.Http;
import io.lmcache.server.testing.JavaWorker;
import io.lmcache.server.testing.JavaWorker.Geometry;
import io.lmcache.server.testing.JavaWorker.Layout;
import io.lmcache.server.testing.ServerLogOnFailure;
import io.lmcache.server.testing.ServerProcess;
import java.lang.foreign.ValueLayout;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.UserDefinedFileAttributeView;
import java.time.Duration;
import java.util.List;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.junit.jupiter.api.io.TempDir;

/**
 * Every layout's objects are LMCache's {@code KV_2LTD} (issue 27): a CPU worker whose blocks are head-major (HND, several heads)
 * and one whose blocks are token-major (NHD), of one model, holding the same KV, store objects whose bytes are equal and equal to
 * {@code KV_2LTD} worked out here from its definition ({@code [planes, layers, tokens, heads x head size]}, K plane then V);
 * fs_native names them as LMCache does (no {@code @f} field) and records one format for both; each worker RETRIEVEs the
 * other's chunk into its own blocks byte for byte, also from a row inside a block (a skip of 20 tokens). The same for fused K/V
 * ({@code [nb, bs, nh, 2*hs]} and its HND form): one plane of packed rows, {@code [1, layers, tokens, heads x 2 head size]}, as
 * LMCache's {@code NL_X_NB_BS_NH_TWO_HS} spec stores it ({@code kv_size} 1, head size doubled).
 */
@ExtendWith(ServerLogOnFailure.class)
class LayoutSharingIT {
    private static final int CHUNK = 256;
    /** 2 layers, 64 blocks of 16 tokens, 4 heads of 32 (64-byte rows): a chunk is 16 blocks. */
    private static final Geometry GEOMETRY = new Geometry(2, 64, 16, 4, 32);
    private static final int BLOCKS = CHUNK / GEOMETRY.blockSize();
    private static final int SKIP = 20;
    /** A bf16 element as raw bits, little-endian as the expected objects are written. */
    private static final ValueLayout.OfShort ELEMENT = ValueLayout.JAVA_SHORT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);

    @TempDir
    Path dir;

    @Test
    void hndAndNhdWorkersShareByteIdenticalKv2ltdObjects() throws Exception {
        share(Layout.NHD, Layout.HND, "org/share-flash");
    }

    @Test
    void fusedHndAndNhdWorkersShareByteIdenticalObjects() throws Exception {
        share(Layout.FUSED, Layout.FUSED_HND, "org/share-fused");
    }

    private void share(Layout nhd, Layout hnd, String model) throws Exception {
        String adapter = "{\"type\":\"fs_native\",\"base_path\":\"" + dir + "\"}";
        try (ServerProcess server = ServerProcess.start("--l1-size-gb", "0.0625", "--l2-adapter", adapter);
                JavaWorker tokenMajor = new JavaWorker(server.endpoint(), 71, model, GEOMETRY, nhd);
                JavaWorker headMajor = new JavaWorker(server.endpoint(), 72, model, GEOMETRY, hnd)) {
            tokenMajor.register();
            headMajor.register();
            int[] ownA = JavaWorker.range(0, BLOCKS);
            int[] ownB = JavaWorker.range(BLOCKS, BLOCKS);
            write(tokenMajor, nhd, ownA);
            write(headMajor, hnd, ownB);
            int[] tokensA = JavaWorker.tokens(41, CHUNK);
            int[] tokensB = JavaWorker.tokens(42, CHUNK);
            assertTrue(tokenMajor.store(tokensA, 0, CHUNK, ownA, "store-a"), "STORE from the " + nhd + " worker");
            assertTrue(headMajor.store(tokensB, 0, CHUNK, ownB, "store-b"), "STORE from the " + hnd + " worker");
            await("write-through").atMost(Duration.ofSeconds(20)).pollInterval(Duration.ofMillis(20))
                    .until(() -> Http.metric(server, "lmcache_mp_l2_store_completed_objects_chunks_total") >= 2);

            List<Path> files;
            try (Stream<Path> listed = Files.list(dir)) {
                files = listed.filter(f -> f.getFileName().toString().endsWith(".data")).sorted().toList();
            }
            assertEquals(2, files.size(), "one object per chunk: " + files);
            byte[] expected = kv2ltd(nhd == Layout.FUSED);
            for (Path file : files) {
                String name = file.getFileName().toString();
                assertTrue(name.matches(model.replace("/", "-SEP-") + "@0x01000100@0@[0-9a-f]{64}\\.data"), "LMCache's name: " + name);
                assertFalse(name.contains("@f"), "no layout field in " + name);
                assertArrayEquals(expected, Files.readAllBytes(file), name + " holds KV_2LTD of the stored KV, whichever worker wrote it");
            }
            assertEquals(format(files.get(0)), format(files.get(1)), "both workers record one format");

            int[] intoB = JavaWorker.range(2 * BLOCKS, BLOCKS);
            assertTrue(headMajor.retrieve(tokensA, 0, CHUNK, intoB, 0, "retrieve-a"), "the " + hnd + " worker RETRIEVEs the " + nhd + " chunk");
            assertArrayEquals(blockBytes(headMajor, hnd, ownB), blockBytes(headMajor, hnd, intoB), "restored in its own layout");
            int[] intoA = JavaWorker.range(BLOCKS, BLOCKS);
            assertTrue(tokenMajor.retrieve(tokensB, 0, CHUNK, intoA, 0, "retrieve-b"), "and the other way");
            assertArrayEquals(blockBytes(tokenMajor, nhd, ownA), blockBytes(tokenMajor, nhd, intoA));

            int[] skipped = JavaWorker.range(3 * BLOCKS, BLOCKS);
            assertTrue(headMajor.retrieve(tokensA, 0, CHUNK, skipped, SKIP, "retrieve-skip"));
            assertSkipped(headMajor, hnd, skipped);
        }
    }

    /** The element (K or V) of layer {@code layer}, token {@code token} of the chunk, head and {@code d}: never 0. */
    private static short value(int plane, int layer, int token, int head, int d) {
        int x = (((plane * 7 + layer) * 1009 + token) * 31 + head) * 131 + d;
        x ^= x >>> 13;
        x *= 0x5bd1e995;
        x ^= x >>> 15;
        return (short) (x | 1);
    }

    /** Writes the chunk's KV into {@code blocks} (block {@code i} holds tokens {@code 16 i ..}) in the worker's own layout. */
    private static void write(JavaWorker worker, Layout layout, int[] blocks) {
        forEachElement(layout, blocks, (offset, plane, layer, token, head, d) ->
                worker.tensor(layer).set(ELEMENT, offset, value(plane, layer, token, head, d)));
    }

    /** Every element of {@code blocks} in logical order (layer, plane, token, head, d), as bytes. */
    private static byte[] blockBytes(JavaWorker worker, Layout layout, int[] blocks) {
        ByteBuffer out = ByteBuffer.allocate((int) (2 * GEOMETRY.layers() * blocks.length * GEOMETRY.pieceBytes()))
                .order(ByteOrder.LITTLE_ENDIAN);
        forEachElement(layout, blocks, (offset, plane, layer, token, head, d) ->
                out.putShort(worker.tensor(layer).get(ELEMENT, offset)));
        return out.array();
    }

    /** A RETRIEVE with a skip writes nothing before the skipped tokens (left zero) and the chunk's KV from there on. */
    private static void assertSkipped(JavaWorker worker, Layout layout, int[] blocks) {
        forEachElement(layout, blocks, (offset, plane, layer, token, head, d) -> {
            short expected = token < SKIP ? 0 : value(plane, layer, token, head, d);
            short actual = worker.tensor(layer).get(ELEMENT, offset);
            if (actual != expected) {
                throw new AssertionError("layer " + layer + " plane " + plane + " token " + token + " head " + head + " d " + d + ": "
                        + actual + " != " + expected);
            }
        });
    }

    @FunctionalInterface
    private interface Element {
        void at(long byteOffset, int plane, int layer, int token, int head, int d);
    }

    private static void forEachElement(Layout layout, int[] blocks, Element element) {
        for (int layer = 0; layer < GEOMETRY.layers(); layer++) {
            for (int plane = 0; plane < 2; plane++) {
                for (int k = 0; k < blocks.length; k++) {
                    for (int row = 0; row < GEOMETRY.blockSize(); row++) {
                        for (int head = 0; head < GEOMETRY.heads(); head++) {
                            for (int d = 0; d < GEOMETRY.headSize(); d++) {
                                long offset = 2 * layout.elementOffset(GEOMETRY, plane, blocks[k], row, head, d);
                                element.at(offset, plane, layer, k * GEOMETRY.blockSize() + row, head, d);
                            }
                        }
                    }
                }
            }
        }
    }

    /**
     * The chunk's object from the definition: {@code KV_2LTD [2, layers, tokens, heads x head size]} (K plane, then V), or for
     * fused K/V one plane {@code [1, layers, tokens, heads x 2 head size]} whose head rows are K then V.
     */
    private static byte[] kv2ltd(boolean fused) {
        int layers = GEOMETRY.layers();
        int heads = GEOMETRY.heads();
        int hs = GEOMETRY.headSize();
        ByteBuffer out = ByteBuffer.allocate((int) (2L * layers * CHUNK * heads * hs * 2)).order(ByteOrder.LITTLE_ENDIAN);
        for (int plane = 0; plane < 2; plane++) {
            for (int layer = 0; layer < layers; layer++) {
                for (int token = 0; token < CHUNK; token++) {
                    for (int head = 0; head < heads; head++) {
                        for (int d = 0; d < hs; d++) {
                            long element = fused ? ((long) (layer * CHUNK + token) * heads + head) * 2 * hs + plane * hs + d
                                    : (((long) plane * layers + layer) * CHUNK + token) * heads * hs + head * hs + d;
                            out.putShort((int) (2 * element), value(plane, layer, token, head, d));
                        }
                    }
                }
            }
        }
        return out.array();
    }

    private static String format(Path file) throws Exception {
        UserDefinedFileAttributeView view = Files.getFileAttributeView(file, UserDefinedFileAttributeView.class);
        ByteBuffer buffer = ByteBuffer.allocate(view.size("lmcache_format"));
        view.read("lmcache_format", buffer);
        return new String(buffer.array(), 0, buffer.position(), StandardCharsets.UTF_8);
    }
}
