// phi1(z) = (e^z - 1)/z (1 at z = 0): the Rush-Larsen factor of a gate update
// w + h (a w + b) phi1(h a), in float and in double.
#pragma once

// float: a Taylor polynomial for |z| <= 1/2 (the first term left out, z^8/9!, is below 2e-8 relative) and
// (e^z - 1)/z beyond it, where e^z - 1 is at least 0.39 in size, so the fast exponential's
// few-ulp error stays a few ulp. 13 instructions without a branch, where expm1f costs about 30
// with one (ORd has 33 gates per cell-step).
__device__ __forceinline__ float phi1(float z)
{
    float p = fmaf(z, 2.4801587e-5f, 1.9841270e-4f);    // 1/8!, 1/7!
    p = fmaf(z, p, 1.3888889e-3f);                      // 1/6!
    p = fmaf(z, p, 8.3333333e-3f);                      // 1/5!
    p = fmaf(z, p, 4.1666667e-2f);                      // 1/4!
    p = fmaf(z, p, 1.6666667e-1f);                      // 1/3!
    p = fmaf(z, p, 0.5f);
    p = fmaf(z, p, 1.0f);
    const float e = (__expf(z) - 1.0f) / z;
    return fabsf(z) <= 0.5f ? p : e;
}

__device__ __forceinline__ double phi1(double z)
{
    return fabs(z) < 1e-5 ? 1.0 + 0.5 * z : expm1(z) / z;
}
