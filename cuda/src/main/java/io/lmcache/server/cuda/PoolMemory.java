package io.lmcache.server.cuda;

import jcuda.driver.CUdeviceptr;

/**
 * Host memory a transfer copies to or from, addressed by pool offset: the L1 pool ({@link PinnedPool}, pinned region by
 * region) or the GPU warm-up's scratch memory ({@link ScratchMemory}), so the warm-up runs the very {@link Transfer} code
 * real requests run without touching the pool.
 */
public interface PoolMemory {
    /** The device-visible address of a pool offset (its region pinned first if it is not yet). */
    long address(long poolOffset);

    /** The same as a driver pointer (for {@code cuMemcpyAsync}). */
    CUdeviceptr pointer(long poolOffset);

    /** Bytes per region: a DMA run never crosses one. */
    long regionBytes();
}
