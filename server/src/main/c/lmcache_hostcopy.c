/*
 * The CPU path's copies with non-temporal stores (issue 52), guarded against SIGBUS.
 *
 * Why native: an ordinary store first reads the destination line (write-allocate), so a copy moves three bytes of memory
 * traffic per byte; a non-temporal store does not, and the JVM issues those only in copies of 2.5 MB a call or more, which
 * a KV piece (32-512 KiB) never is (bench/journal/2026-12-06-cpu-copy-non-temporal-stores.md).
 *
 * Why guarded: one side of every copy is a worker's POSIX shm segment, which the worker may truncate while the server copies;
 * touching a page past the new end raises SIGBUS. Inside the JVM's copy stubs that becomes an InternalError; in native code
 * it would end the server. So a copy runs with a per-thread jump buffer armed, and this library's SIGBUS handler jumps back
 * to it (the copy returns -1); a SIGBUS anywhere else goes to the handler that was installed before (the JVM's), unchanged.
 *
 * Built by build.sh beside this file (a C compiler and x86-64); the server copies in Java where the library is absent.
 */
#define _GNU_SOURCE
#include <immintrin.h>
#include <setjmp.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <ucontext.h>

/* Pieces below this are copied with memcpy: the fences and the head and tail cost more than the saved reads. */
#define STREAM_MIN 4096

static struct sigaction previous;
static int installed;
/* initial-exec: no allocation on a thread's first access, which may be inside the signal handler */
static __thread sigjmp_buf *armed __attribute__((tls_model("initial-exec")));
static void (*stream)(char *, const char *, size_t);

static void on_sigbus(int sig, siginfo_t *info, void *context) {
    sigjmp_buf *env = armed;
    if (env != NULL) {
        armed = NULL;
        /* the mask the thread had when it faulted: the handler's (SIGBUS and the JVM's sa_mask) must not outlive the jump */
        sigprocmask(SIG_SETMASK, &((ucontext_t *) context)->uc_sigmask, NULL);
        siglongjmp(*env, 1);
    }
    if (previous.sa_flags & SA_SIGINFO) {
        previous.sa_sigaction(sig, info, context);
    } else if (previous.sa_handler == SIG_DFL) {
        /* nobody handled it before us either: the faulting access runs again and the default action ends the process */
        signal(sig, SIG_DFL);
    } else if (previous.sa_handler != SIG_IGN) {
        previous.sa_handler(sig);
    }
}

/* 64-byte-aligned dst, n a multiple of 128 */
__attribute__((target("avx2"))) static void stream_avx2_run(char *dst, const char *src, size_t n) {
    for (size_t i = 0; i < n; i += 128) {
        __m256i a = _mm256_loadu_si256((const __m256i *) (src + i));
        __m256i b = _mm256_loadu_si256((const __m256i *) (src + i + 32));
        __m256i c = _mm256_loadu_si256((const __m256i *) (src + i + 64));
        __m256i d = _mm256_loadu_si256((const __m256i *) (src + i + 96));
        _mm256_stream_si256((__m256i *) (dst + i), a);
        _mm256_stream_si256((__m256i *) (dst + i + 32), b);
        _mm256_stream_si256((__m256i *) (dst + i + 64), c);
        _mm256_stream_si256((__m256i *) (dst + i + 96), d);
    }
}

/*
 * Four 4 KiB blocks at a time, 128 bytes of each per step, the source prefetched two steps ahead: with one straight
 * stream a thread, sixteen threads fell short of the host's copy; four streams a thread keep more reads in flight
 * (glibc's large_memcpy_4x has the same shape). Figures: bench/journal/2026-12-07-four-block-native-copy.md.
 */
#define BLOCK 4096
__attribute__((target("avx2"))) static void stream_avx2(char *dst, const char *src, size_t n) {
    size_t quads = n & ~(size_t) (4 * BLOCK - 1);
    for (size_t q = 0; q < quads; q += 4 * BLOCK) {
        for (size_t i = q; i < q + BLOCK; i += 128) {
            __m256i v[16];
            for (int b = 0; b < 4; b++) {
                const char *s = src + i + b * BLOCK;
                _mm_prefetch(s + 256, _MM_HINT_T0);
                _mm_prefetch(s + 320, _MM_HINT_T0);
                v[4 * b] = _mm256_loadu_si256((const __m256i *) s);
                v[4 * b + 1] = _mm256_loadu_si256((const __m256i *) (s + 32));
                v[4 * b + 2] = _mm256_loadu_si256((const __m256i *) (s + 64));
                v[4 * b + 3] = _mm256_loadu_si256((const __m256i *) (s + 96));
            }
            for (int b = 0; b < 4; b++) {
                char *d = dst + i + b * BLOCK;
                _mm256_stream_si256((__m256i *) d, v[4 * b]);
                _mm256_stream_si256((__m256i *) (d + 32), v[4 * b + 1]);
                _mm256_stream_si256((__m256i *) (d + 64), v[4 * b + 2]);
                _mm256_stream_si256((__m256i *) (d + 96), v[4 * b + 3]);
            }
        }
    }
    stream_avx2_run(dst + quads, src + quads, n - quads);
}

static void stream_sse2(char *dst, const char *src, size_t n) {
    for (size_t i = 0; i < n; i += 64) {
        __m128i a = _mm_loadu_si128((const __m128i *) (src + i));
        __m128i b = _mm_loadu_si128((const __m128i *) (src + i + 16));
        __m128i c = _mm_loadu_si128((const __m128i *) (src + i + 32));
        __m128i d = _mm_loadu_si128((const __m128i *) (src + i + 48));
        _mm_stream_si128((__m128i *) (dst + i), a);
        _mm_stream_si128((__m128i *) (dst + i + 16), b);
        _mm_stream_si128((__m128i *) (dst + i + 32), c);
        _mm_stream_si128((__m128i *) (dst + i + 48), d);
    }
}

static void copy(char *dst, const char *src, size_t n) {
    if (n < STREAM_MIN) {
        memcpy(dst, src, n);
        return;
    }
    size_t head = (64 - ((uintptr_t) dst & 63)) & 63;
    memcpy(dst, src, head);
    size_t body = (n - head) & ~(size_t) 127;
    stream(dst + head, src + head, body);
    memcpy(dst + head + body, src + head + body, n - head - body);
}

/*
 * Installs the SIGBUS handler, once; the handler installed before stays in charge of every SIGBUS outside a copy.
 * Returns 0, or -1 (errno set) when sigaction failed. Not thread-safe: the server calls it once, under a lock.
 */
int lmc_install(void) {
    if (installed) {
        return 0;
    }
    struct sigaction ours;
    if (sigaction(SIGBUS, NULL, &previous) != 0) {
        return -1;
    }
    /* the previous handler's mask and flags, so it runs as it did when it is chained to */
    ours = previous;
    ours.sa_sigaction = on_sigbus;
    ours.sa_flags |= SA_SIGINFO;
    __builtin_cpu_init();
    stream = __builtin_cpu_supports("avx2") ? stream_avx2 : stream_sse2;
    if (sigaction(SIGBUS, &ours, NULL) != 0) {
        return -1;
    }
    installed = 1;
    return 0;
}

/* Whether the copies stream with AVX2 (1) or SSE2 (0); -1 before lmc_install. */
int lmc_vector_width(void) {
    return stream == NULL ? -1 : stream == stream_avx2 ? 256 : 128;
}

/*
 * Copies count pieces, each three int64 in pieces: destination address, source address, length (no piece overlaps
 * another's destination or its own source), then fences, so the bytes are visible to every thread before whatever the
 * caller stores next. Returns 0, or -1 when a page of either side raised SIGBUS (some pieces may have been copied, or part
 * of one). anchor is not read: the caller passes the pool's segment there, so the JVM keeps its memory mapped meanwhile.
 */
int lmc_copy_pieces(const void *anchor, const int64_t *pieces, int32_t count) {
    (void) anchor;
    sigjmp_buf env;
    if (sigsetjmp(env, 0) != 0) {
        _mm_sfence();
        return -1;
    }
    armed = &env;
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    for (int32_t i = 0; i < count; i++) {
        copy((char *) (intptr_t) pieces[3 * i], (const char *) (intptr_t) pieces[3 * i + 1], (size_t) pieces[3 * i + 2]);
    }
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    armed = NULL;
    _mm_sfence();
    return 0;
}
