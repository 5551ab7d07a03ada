// Philox4x32-10 (Salmon et al. 2011), bit-identical to app/compute/philox.py.
// Key = 64-bit seed as two words; counter = (n_lo, n_hi, stream_lo, stream_hi).
#pragma once
#include "portable.cuh"

#define PHILOX_M0 0xD2511F53u
#define PHILOX_M1 0xCD9E8D57u
#define PHILOX_W0 0x9E3779B9u
#define PHILOX_W1 0xBB67AE85u

struct philox_u4 { uint32_t x, y, z, w; };

__device__ __forceinline__ philox_u4 philox_round(const philox_u4 c, const uint32_t k0, const uint32_t k1)
{
    const uint32_t lo0 = PHILOX_M0 * c.x, hi0 = __umulhi(PHILOX_M0, c.x);
    const uint32_t lo1 = PHILOX_M1 * c.z, hi1 = __umulhi(PHILOX_M1, c.z);
    return {hi1 ^ c.y ^ k0, lo1, hi0 ^ c.w ^ k1, lo0};
}

__device__ __forceinline__ philox_u4 philox4x32_10(philox_u4 c, uint32_t k0, uint32_t k1)
{
#pragma unroll
    for (int r = 0; r < 10; ++r) {
        if (r) { k0 += PHILOX_W0; k1 += PHILOX_W1; }
        c = philox_round(c, k0, k1);
    }
    return c;
}

__device__ __forceinline__ philox_u4 philox_draw(uint64_t seed, uint64_t stream, uint64_t n)
{
    philox_u4 c = {(uint32_t)n, (uint32_t)(n >> 32), (uint32_t)stream, (uint32_t)(stream >> 32)};
    return philox4x32_10(c, (uint32_t)seed, (uint32_t)(seed >> 32));
}

// The ten round keys of one key, held in registers, for a loop of many draws under it. Left to
// itself the compiler recomputes each round key from the key inside such a loop (18 adds a
// draw) to save registers; the opaque moves make the 20 values registers it keeps.
struct philox_keys { uint32_t k0[10], k1[10]; };

__device__ __forceinline__ philox_keys philox_schedule(uint64_t seed)
{
    philox_keys k;
    uint32_t k0 = (uint32_t)seed, k1 = (uint32_t)(seed >> 32);
#pragma unroll
    for (int r = 0; r < 10; ++r) {
        if (r) { k0 += PHILOX_W0; k1 += PHILOX_W1; }
        uint32_t a = k0, b = k1;
#ifdef __CUDA_ARCH__
        asm volatile("mov.b32 %0, %0;" : "+r"(a));
        asm volatile("mov.b32 %0, %0;" : "+r"(b));
#endif
        k.k0[r] = a;
        k.k1[r] = b;
    }
    return k;
}

__device__ __forceinline__ philox_u4 philox_draw(const philox_keys& k, uint64_t stream, uint64_t n)
{
    philox_u4 c = {(uint32_t)n, (uint32_t)(n >> 32), (uint32_t)stream, (uint32_t)(stream >> 32)};
#pragma unroll
    for (int r = 0; r < 10; ++r) c = philox_round(c, k.k0[r], k.k1[r]);
    return c;
}

// uint32 -> float in (0, 1) from the top 23 bits; exact in float32 and identical to NumPy's twin
// (with 24 bits the top value (2^24 - 1) + 0.5 would round to 2^24 and give exactly 1).
// Computed as the bits of 1 + m 2^-23 (m = x >> 9) read as a float, minus 1 - 2^-24: exactly
// (m + 0.5) 2^-23 (Sterbenz), in two instructions where the integer conversion took four.
__device__ __forceinline__ float philox_uniform_f32(uint32_t x)
{
    return __uint_as_float((x >> 9) + 0x3f800000u) - 0.99999994039535522f;
}

__device__ __forceinline__ double philox_uniform_f64(uint32_t x)
{
    return ((double)x + 0.5) * 2.3283064365386963e-10;
}
