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
// The PTX holds two entry points: copy_pieces (plain pieces) and copy_pieces_kv2ltd (the same, and
// head-major blocks copied into token-major order); the Java side looks for the second in the PTX
// text (HeadTranspose.kernelInPtx) and keeps head-major layouts in their block order without it.
// cuda/src/test/cuda/copy_pieces_emulation.cpp runs copy_pieces_kv2ltd from this file on the CPU (g++).

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

// --- copy_pieces_kv2ltd ---------------------------------------------------------------------------
// The same gather/scatter for batches where some pieces are head-major blocks (vLLM's HND blocks,
// [heads][block rows][row]; fused K/V HND blocks with their packed 2 * head size row) that the
// object holds token-major ([block rows][heads][row]), LMCache's object layout KV_2LTD. A piece is
// one block or a run of adjacent blocks; each has one descriptor and a shape word, and the threads
// work out their rows' offsets, so the descriptors are as few as for plain pieces.
//
// desc holds n triples {src, dst, bytes}, then n shape words (HeadTranspose.java):
//   bits 0-15 heads, 16-31 rows of a block, 32-47 first row copied, 48-63 row bytes; 0: a plain piece.
// to_object != 0: src is the worker's tensor (head-major) and dst the staging buffer (token-major,
// contiguous from the first byte copied); else the other way round. Object-side row r (token-major:
// block by block, token by token from the first row copied, head by head) sits in the tensor at
// ((block * heads + head) * rows + first + token) * row bytes from the piece's tensor address.

// One plain piece, as copy_pieces copies it (copy_pieces itself stays as it was).
__device__ __forceinline__ void copy_flat(const char* src, char* dst, unsigned long long bytes, unsigned long long lane) {
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

// Unit T (uint4 or char) at object-side index i of a head-major piece: its offset in the tensor,
// in units. A piece is at most a staging half (PieceStream cuts longer runs), so 32 bits hold it.
template <typename T>
__device__ __forceinline__ unsigned int tensor_unit(unsigned int i, unsigned int per_row, unsigned int heads, unsigned int rows,
        unsigned int first, unsigned int per_block) {
    const unsigned int row = i / per_row;
    const unsigned int col = i - row * per_row;
    const unsigned int block = row / per_block;
    const unsigned int within = row - block * per_block;
    const unsigned int token = within / heads;
    const unsigned int head = within - token * heads;
    return ((block * heads + head) * rows + first + token) * per_row + col;
}

// One head-major piece in units of T: per_row units a row, units in all. The object side is read
// or written in order (coalesced); the tensor side a row (usually 256 bytes) at a time. The
// direction is a template parameter so that each loop computes the tensor offset where it uses it
// and keeps no array of offsets (one spilled past the 64 registers of 1024-thread blocks).
template <typename T, bool TO_OBJECT>
__device__ __forceinline__ void copy_rows(const T* src, T* dst, unsigned int units, unsigned int per_row, unsigned int heads,
        unsigned int rows, unsigned int first, unsigned int lane) {
    const unsigned int per_block = heads * (rows - first);
    for (unsigned int at = lane; at < units; at += UNROLL * GROUP) {
        T v[UNROLL];
#pragma unroll
        for (int u = 0; u < UNROLL; u++) {
            const unsigned int i = at + u * GROUP;
            if (i < units) {
                v[u] = src[TO_OBJECT ? tensor_unit<T>(i, per_row, heads, rows, first, per_block) : i];
            }
        }
#pragma unroll
        for (int u = 0; u < UNROLL; u++) {
            const unsigned int i = at + u * GROUP;
            if (i < units) {
                dst[TO_OBJECT ? i : tensor_unit<T>(i, per_row, heads, rows, first, per_block)] = v[u];
            }
        }
    }
}

// A head-major piece whose rows are not 16-byte aligned (a head size of 4 bf16, say): byte by byte,
// out of line so that the wide path keeps the registers.
template <bool TO_OBJECT>
__device__ __noinline__ void copy_head_major_bytes(const char* src, char* dst, unsigned int bytes, unsigned int row_bytes,
        unsigned int heads, unsigned int rows, unsigned int first_row, unsigned int lane) {
    copy_rows<char, TO_OBJECT>(src, dst, bytes, row_bytes, heads, rows, first_row, lane);
}

// One head-major piece, in 16-byte words when both ends and the row are 16-byte aligned, else bytes.
template <bool TO_OBJECT>
__device__ __forceinline__ void copy_head_major(const char* src, char* dst, unsigned long long bytes, unsigned long long shape,
        unsigned int lane) {
    const unsigned int heads = (unsigned int) (shape & 0xFFFF);
    const unsigned int rows = (unsigned int) ((shape >> 16) & 0xFFFF);
    const unsigned int first_row = (unsigned int) ((shape >> 32) & 0xFFFF);
    const unsigned int row_bytes = (unsigned int) ((shape >> 48) & 0xFFFF);
    if ((((uintptr_t) src | (uintptr_t) dst | row_bytes) & 15) == 0) {
        copy_rows<uint4, TO_OBJECT>((const uint4*) src, (uint4*) dst, (unsigned int) (bytes >> 4), row_bytes >> 4, heads, rows,
                first_row, lane);
    } else {
        copy_head_major_bytes<TO_OBJECT>(src, dst, (unsigned int) bytes, row_bytes, heads, rows, first_row, lane);
    }
}

extern "C" __global__ void __launch_bounds__(1024) copy_pieces_kv2ltd(const unsigned long long* __restrict__ desc, int n,
        int to_object) {
    __shared__ unsigned long long tile[4 * TILE];
    const int per = (n + gridDim.x - 1) / gridDim.x;
    const int first = blockIdx.x * per;
    const int last = min(n, first + per);
    const int groups = blockDim.x / GROUP;
    const int group = threadIdx.x / GROUP;
    const unsigned int lane = threadIdx.x % GROUP;
    const unsigned long long* shapes = desc + 3ull * n;
    for (int base = first; base < last; base += TILE) {
        const int count = min(TILE, last - base);
        __syncthreads(); // every thread is done with the previous tile
        for (int t = threadIdx.x; t < 3 * count; t += blockDim.x) {
            tile[t] = desc[3ull * base + t];
        }
        for (int t = threadIdx.x; t < count; t += blockDim.x) {
            tile[3 * TILE + t] = shapes[base + t];
        }
        __syncthreads();
        for (int p = group; p < count; p += groups) {
            const char* src = (const char*) tile[3 * p];
            char* dst = (char*) tile[3 * p + 1];
            const unsigned long long bytes = tile[3 * p + 2];
            const unsigned long long shape = tile[3 * TILE + p];
            if (shape == 0) {
                copy_flat(src, dst, bytes, lane);
                continue;
            }
            if (to_object) {
                copy_head_major<true>(src, dst, bytes, shape, lane);
            } else {
                copy_head_major<false>(src, dst, bytes, shape, lane);
            }
        }
    }
}
