package io.lmcache.server.protocol;

import java.util.Arrays;
import java.util.concurrent.atomic.AtomicReferenceArray;
import java.util.concurrent.atomic.LongAdder;

/**
 * Recently decoded msgpack integer arrays (a key's {@code token_ids}), so that one prompt is decoded once, not once per request
 * about it: vLLM asks LOOKUP again for a waiting request at every scheduler step, then RETRIEVEs that prefix and STOREs the
 * prompt and what follows it, and every tensor-parallel rank sends the same tokens. A msgpack integer is self-delimiting, so
 * where a frame's array bytes equal a remembered array's from its start, they decode to the same leading values: those are
 * copied, the rest decoded. Decoding is a serial chain of loads (each element's size decides where the next starts): 34 816
 * Qwen-like tokens took ~200–325 µs on the H200 host (bench/RESULTS.md#lookup-path); comparing and copying the same bytes costs a few.
 *
 * <p>Direct-mapped and lock-free: {@link #SLOTS} slots indexed by a fingerprint of the array's first {@link #KEY_BYTES} bytes
 * (so a longer array of the same prefix meets its shorter self); a newer array replaces the slot's. Each entry keeps its own
 * copy of the bytes and, every {@link #STRIDE} elements, the byte offset where the element starts, so a partial match reuses
 * every whole stride before the first differing byte. At most {@link #MAX_VALUES} values an entry: at most ~9.5 MiB in all.
 * Arrays shorter than {@link #MIN_VALUES} are not memoized.
 *
 * <p><b>Shared, read-only arrays.</b> An array remembered whole is the array the request that decoded it got, and a later
 * frame of exactly the same array gets that same instance ({@link #whole}): no allocation, no copy, and a later memo of the
 * same tokens (the chunk-hash memo) recognizes it by identity instead of comparing 139 KiB again. So every array this memo
 * hands out is read-only: nothing may write a decoded key's token ids ({@code CacheKey#tokenIds}). {@link #shares} tells
 * whether an array is one of them.
 */
public final class IntArrayMemo {
    static final int SLOTS = 16;
    static final int STRIDE = 64;
    static final int MIN_VALUES = 256;
    static final int MAX_VALUES = 1 << 16;
    static final int KEY_BYTES = 32;

    /** One array: its first {@code values.length} elements' bytes, values, and {@code offsets[k]}: where element {@code k * STRIDE} starts. */
    private record Entry(byte[] encoded, int[] values, int[] offsets) {}

    /** What {@link #reuse} found: the leading elements copied and the bytes they take. */
    record Reused(int elements, int bytes) {
        static final Reused NONE = new Reused(0, 0);
    }

    /** A remembered array whose bytes a frame repeats exactly: the array itself (shared, read-only) and the bytes it takes. */
    record Whole(int[] values, int bytes) {}

    private final AtomicReferenceArray<Entry> slots = new AtomicReferenceArray<>(SLOTS);
    private final LongAdder reusedValues = new LongAdder();

    /** Whether an array of {@code count} elements is worth memoizing. */
    static boolean applies(int count) {
        return count >= MIN_VALUES;
    }

    /**
     * The remembered array itself when the frame's array of {@code count} elements from {@code frame[start]} is exactly one
     * (the same count, the same bytes); null otherwise. The array is shared with every request that decoded the same bytes.
     */
    Whole whole(byte[] frame, int start, int end, int count) {
        if (end - start < KEY_BYTES) {
            return null;
        }
        Entry entry = slots.get(slot(frame, start));
        if (entry == null || entry.values.length != count || entry.encoded.length > end - start
                || !Arrays.equals(frame, start, start + entry.encoded.length, entry.encoded, 0, entry.encoded.length)) {
            return null;
        }
        reusedValues.add(count);
        return new Whole(entry.values, entry.encoded.length);
    }

    /** Whether {@code values} is an array this memo holds (and so may have handed to several requests): read-only. */
    public boolean shares(int[] values) {
        for (int i = 0; i < SLOTS; i++) {
            Entry entry = slots.get(i);
            if (entry != null && entry.values == values) {
                return true;
            }
        }
        return false;
    }

    /**
     * Copies into {@code values} the leading elements of {@code count} that a remembered array with the same bytes from
     * {@code frame[start]} has (whole strides, or the whole remembered array), and into {@code offsets} their stride offsets.
     */
    Reused reuse(byte[] frame, int start, int end, int count, int[] values, int[] offsets) {
        if (end - start < KEY_BYTES) {
            return Reused.NONE;
        }
        Entry entry = slots.get(slot(frame, start));
        if (entry == null) {
            return Reused.NONE;
        }
        int limit = Math.min(entry.encoded.length, end - start);
        int differ = Arrays.mismatch(frame, start, start + limit, entry.encoded, 0, limit);
        int common = differ < 0 ? limit : differ;
        int elements;
        int bytes;
        if (common == entry.encoded.length && entry.values.length <= count) {
            elements = entry.values.length;
            bytes = entry.encoded.length;
        } else {
            int k = Math.min(count, entry.values.length) / STRIDE;
            while (k > 0 && entry.offsets[k] > common) {
                k--;
            }
            elements = k * STRIDE;
            bytes = entry.offsets[k];
        }
        if (elements == 0) {
            return Reused.NONE;
        }
        System.arraycopy(entry.values, 0, values, 0, elements);
        System.arraycopy(entry.offsets, 0, offsets, 0, elements / STRIDE + 1);
        reusedValues.add(elements);
        return new Reused(elements, bytes);
    }

    /**
     * Remembers an array decoded from {@code frame[start, end)}: {@code values} and {@code offsets} as filled by the reader (at
     * most {@link #MAX_VALUES} of them kept), unless it is what the slot holds already. {@code values} itself is kept when it
     * is kept whole, so the request that decoded it shares it with later ones: the caller hands it out read-only.
     */
    void remember(byte[] frame, int start, int end, int[] values, int[] offsets) {
        int kept = Math.min(values.length, MAX_VALUES);
        int bytes = kept == values.length ? end - start : offsets[kept / STRIDE];
        int slot = slot(frame, start);
        Entry old = slots.get(slot);
        if (old != null && old.values.length >= kept && old.encoded.length >= bytes
                && Arrays.equals(old.encoded, 0, bytes, frame, start, start + bytes)) {
            return;
        }
        slots.set(slot, new Entry(Arrays.copyOfRange(frame, start, start + bytes), kept == values.length ? values : Arrays.copyOf(values, kept),
                Arrays.copyOf(offsets, kept / STRIDE + 1)));
    }

    /** Values copied from a remembered array instead of decoded, since start. */
    public long reusedValues() {
        return reusedValues.sum();
    }

    private static int slot(byte[] frame, int start) {
        int h = 1;
        for (int i = start; i < start + KEY_BYTES; i++) {
            h = 31 * h + frame[i];
        }
        h ^= h >>> 16;
        return h & (SLOTS - 1);
    }
}
