package io.lmcache.server.transfer;

/**
 * Receives the byte ranges of one copy: a range of a registered tensor and its place in a pool object. Plain pieces are
 * contiguous on both sides; a head-major piece ({@link #transposed}) has the same length on both sides but its rows sit
 * in another order in the tensor.
 */
@FunctionalInterface
public interface PieceSink {
    void piece(int tensor, long tensorOffset, long objectOffset, long length);

    /**
     * A head-major block (or run of adjacent blocks) that the object holds token-major, LMCache's {@code KV_2LTD}: {@code shape}
     * ({@code cuda.HeadTranspose}) says how its rows map. A sink that cannot transpose refuses it, so no copy ever writes
     * such a block in the wrong order (the layout detector gives those paths the block order instead).
     */
    default void transposed(int tensor, long tensorOffset, long objectOffset, long length, long shape) {
        throw new IllegalStateException("this copy path cannot transpose head-major blocks into token-major objects");
    }

    /** The five-argument form of a sink that takes both kinds of piece (shape 0: plain). */
    @FunctionalInterface
    interface Shaped {
        void piece(int tensor, long tensorOffset, long objectOffset, long length, long shape);
    }

    /** A sink that hands both kinds of piece to {@code shaped} (the CUDA path's piece stream). */
    static PieceSink of(Shaped shaped) {
        return new PieceSink() {
            @Override
            public void piece(int tensor, long tensorOffset, long objectOffset, long length) {
                shaped.piece(tensor, tensorOffset, objectOffset, length, 0);
            }

            @Override
            public void transposed(int tensor, long tensorOffset, long objectOffset, long length, long shape) {
                shaped.piece(tensor, tensorOffset, objectOffset, length, shape);
            }
        };
    }
}
