// copy_pieces_kv2ltd run on the CPU, from the real copy_pieces.cu: each block's 1024 threads are std::threads,
// __syncthreads a std::barrier, __shared__ a static (one block runs at a time). It checks the kernel's own code
// (descriptor tiles, shape words, the 16-byte and the byte path, a partly skipped block) against the definition of
// KV_2LTD, where CI has no GPU and no nvcc; GpuDescriptorsTest checks the Java side that builds the descriptors.
// From the repository root:
//   g++ -std=c++20 -O1 -pthread -w -x c++ cuda/src/test/cuda/copy_pieces_emulation.cpp -o /tmp/copy_pieces_emulation \
//     && /tmp/copy_pieces_emulation
// It prints the bad bytes per case and exits 0 when there are none.
#include <barrier>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <thread>
#include <vector>
#include <algorithm>
struct dim3 { unsigned x = 1, y = 1, z = 1; };
struct uint4 { unsigned x, y, z, w; };
static dim3 blockIdx, blockDim, gridDim;
static thread_local dim3 threadIdx;
static std::barrier<>* bar;
static void __syncthreads() { bar->arrive_and_wait(); }
using std::min;
#define __global__
#define __device__
#define __forceinline__ inline
#define __noinline__
#define __restrict__
#define __launch_bounds__(x)
#define __shared__ static
#include "../../main/cuda/copy_pieces.cu"

static void launch(int grid, const unsigned long long* desc, int n, int to_object) {
    gridDim.x = grid; blockDim.x = 1024;
    for (unsigned b = 0; b < (unsigned) grid; b++) {
        blockIdx.x = b;
        std::barrier<> barrier(1024);
        bar = &barrier;
        std::vector<std::thread> threads;
        for (unsigned t = 0; t < 1024; t++) threads.emplace_back([=] { threadIdx.x = t; copy_pieces_kv2ltd(desc, n, to_object); });
        for (auto& th : threads) th.join();
    }
}

// HND [2][nb][heads][rows][hs] (2-byte elements), one layer; the object is [2][tokens][heads * hs]
static const int NB = 8, H = 3, R = 4, HS = 8, ES = 2;
static int run(int hs_elems) {
    const int row = hs_elems * ES, block = H * R * row;
    std::vector<unsigned char> tensor(2 * NB * block), back(2 * NB * block, 0), staging(1 << 16, 0);
    for (size_t i = 0; i < tensor.size(); i++) tensor[i] = (unsigned char) (i * 7 + 3);
    int blocks[4] = {5, 6, 1, 2};
    // pieces per plane: run {5,6}, run {1,2}; object offsets contiguous
    std::vector<unsigned long long> desc, shapes;
    long at = 0;
    unsigned long long shape = (unsigned long long) H | (unsigned long long) R << 16 | (unsigned long long) row << 48;
    for (int p = 0; p < 2; p++) {
        for (int r = 0; r < 2; r++) {
            int b0 = blocks[2 * r];
            desc.push_back((uintptr_t) (tensor.data() + (p * NB + b0) * block));
            desc.push_back((uintptr_t) (staging.data() + at));
            desc.push_back(2 * block);
            shapes.push_back(shape);
            at += 2 * block;
        }
    }
    int n = 4;
    std::vector<unsigned long long> slot(desc);
    slot.insert(slot.end(), shapes.begin(), shapes.end());
    launch(2, slot.data(), n, 1);
    int bad = 0;
    for (int p = 0; p < 2; p++)
        for (int tok = 0; tok < 16; tok++)
            for (int h = 0; h < H; h++)
                for (int e = 0; e < row; e++) {
                    int b = blocks[tok / R];
                    size_t ti = (size_t) ((p * NB + b) * H + h) * R * row + (tok % R) * row + e;
                    size_t oi = (size_t) ((p * 16 + tok) * H + h) * row + e;
                    if (tensor[ti] != staging[oi]) bad++;
                }
    // scatter back into `back`, blocks {0,3,4,7}, skipping 5 tokens: block 0 skipped, block 3 from row 1 (a partial piece)
    int target[4] = {0, 3, 4, 7};
    std::vector<unsigned long long> d2, s2;
    for (int p = 0; p < 2; p++) {
        long base = p * 16 * H * row;
        // partial block 3: rows 1..3
        d2.push_back((uintptr_t) (staging.data() + base + (1 * R + 1) * H * row));
        d2.push_back((uintptr_t) (back.data() + (p * NB + 3) * block));
        d2.push_back((R - 1) * H * row);
        s2.push_back(shape | 1ull << 32);
        // block 4 and block 7: separate pieces
        for (int k = 2; k < 4; k++) {
            d2.push_back((uintptr_t) (staging.data() + base + k * R * H * row));
            d2.push_back((uintptr_t) (back.data() + (p * NB + target[k]) * block));
            d2.push_back(block);
            s2.push_back(shape);
        }
    }
    std::vector<unsigned long long> slot2(d2);
    slot2.insert(slot2.end(), s2.begin(), s2.end());
    launch(3, slot2.data(), 6, 0);
    for (int p = 0; p < 2; p++)
        for (int k = 0; k < 4; k++)
            for (int h = 0; h < H; h++)
                for (int r = 0; r < R; r++)
                    for (int e = 0; e < row; e++) {
                        int tok = k * R + r;
                        size_t bi = (size_t) ((p * NB + target[k]) * H + h) * R * row + r * row + e;
                        size_t ti = (size_t) ((p * NB + blocks[k]) * H + h) * R * row + r * row + e;
                        unsigned char expect = tok < 5 ? 0 : tensor[ti];
                        if (back[bi] != expect) bad++;
                    }
    printf("head size %d (row %d B): %d bad bytes\n", hs_elems, row, bad);
    return bad;
}

int main() { return run(HS) + run(3) ? 1 : 0; } // 16-byte rows (the wide path), 6-byte rows (bytes)
