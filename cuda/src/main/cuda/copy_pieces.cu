// Gather/scatter copy of many pieces in one launch, between a worker's KV blocks and the copy
// engine's staging buffer, both in device memory. It runs on few blocks (8 by default) so the model
// keeps the other SMs; the PCIe side of a transfer is left to the copy engines (DMA), which reach
// the line rate in both directions at once where SMs reading host memory do not.
//
// The descriptors stay in mapped pinned host memory and are read from there a tile at a time into
// shared memory: uploading them with a copy would queue behind the copy engine's bulk transfers.
//
// Regenerate the PTX the server loads (committed next to the Java sources), on a host with nvcc:
//   nvcc -ptx -arch=compute_80 -O3 -o ../resources/io/lmcache/server/cuda/copy_pieces.ptx copy_pieces.cu
// compute_80 PTX is JIT-compiled by the driver for the GPU it runs on (sm_80 and newer).

#include <stdint.h>

#define TILE 256
#define GROUP 256 // threads copying one piece; a block of 1024 works on four pieces at once
#define UNROLL 8  // 16-byte words each thread has in flight: a 32 KiB piece is one round

// desc holds n triples {src, dst, bytes}. Block b copies pieces [b * per, (b + 1) * per), its
// groups of GROUP threads taking them round-robin. Copies are latency-bound, so the work per
// round is as many independent loads as possible before the first store.
extern "C" __global__ void __launch_bounds__(1024) copy_pieces(const unsigned long long* __restrict__ desc, int n) {
    __shared__ unsigned long long tile[3 * TILE];
    const int per = (n + gridDim.x - 1) / gridDim.x;
    const int first = blockIdx.x * per;
    const int last = min(n, first + per);
    const int groups = blockDim.x / GROUP;
    const int group = threadIdx.x / GROUP;
    const unsigned long long lane = threadIdx.x % GROUP;
    for (int base = first; base < last; base += TILE) {
        const int count = min(TILE, last - base);
        __syncthreads(); // every thread is done with the previous tile
        for (int t = threadIdx.x; t < 3 * count; t += blockDim.x) {
            tile[t] = desc[3ull * base + t];
        }
        __syncthreads();
        for (int p = group; p < count; p += groups) {
            const char* src = (const char*) tile[3 * p];
            char* dst = (char*) tile[3 * p + 1];
            const unsigned long long bytes = tile[3 * p + 2];
            if ((((uintptr_t) src | (uintptr_t) dst | bytes) & 15) == 0) {
                const uint4* s = (const uint4*) src;
                uint4* d = (uint4*) dst;
                const unsigned long long words = bytes >> 4;
                for (unsigned long long at = lane; at < words; at += UNROLL * GROUP) {
                    uint4 v[UNROLL];
#pragma unroll
                    for (int u = 0; u < UNROLL; u++) {
                        if (at + u * GROUP < words) v[u] = s[at + u * GROUP];
                    }
#pragma unroll
                    for (int u = 0; u < UNROLL; u++) {
                        if (at + u * GROUP < words) d[at + u * GROUP] = v[u];
                    }
                }
            } else {
                for (unsigned long long i = lane; i < bytes; i += GROUP) {
                    dst[i] = src[i];
                }
            }
        }
    }
}
