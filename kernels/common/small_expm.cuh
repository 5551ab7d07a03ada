// exp of a small dense matrix in place, in float or double: the algorithm of
// app/compute/small_expm.py (scaling by 2^-s to an inf-norm of at most 1/2, the Taylor polynomial
// of degree 10 by Horner's rule, s squarings). m, work and power: M*M values, row-major.
#pragma once

template <int M, class T>
__device__ void small_expm(T* m, T* work, T* power)
{
    T norm = 0;
    for (int i = 0; i < M; ++i) {
        T row = 0;
        for (int j = 0; j < M; ++j) row += fabs(m[i * M + j]);
        norm = fmax(norm, row);
    }
    int s = 0;
    while (norm > (T)0.5 && s < 60) {   // NaN: no scaling (the result is NaN as the step's)
        norm *= (T)0.5;
        ++s;
    }
    T scale = 1;
    for (int q = 0; q < s; ++q) scale *= (T)0.5;
    for (int i = 0; i < M * M; ++i) {
        m[i] *= scale;
        power[i] = m[i] / (T)10 + (i % (M + 1) == 0 ? (T)1 : (T)0);
    }
    for (int k = 9; k > 0; --k) {
        for (int i = 0; i < M; ++i)
            for (int j = 0; j < M; ++j) {
                T total = 0;
                for (int q = 0; q < M; ++q) total += m[i * M + q] * power[q * M + j];
                work[i * M + j] = total;
            }
        for (int i = 0; i < M * M; ++i) power[i] = work[i] / (T)k + (i % (M + 1) == 0 ? (T)1 : (T)0);
    }
    for (int r = 0; r < s; ++r) {
        for (int i = 0; i < M; ++i)
            for (int j = 0; j < M; ++j) {
                T total = 0;
                for (int q = 0; q < M; ++q) total += power[i * M + q] * power[q * M + j];
                work[i * M + j] = total;
            }
        for (int i = 0; i < M * M; ++i) power[i] = work[i];
    }
    for (int i = 0; i < M * M; ++i) m[i] = power[i];
}
