// Solve a small dense linear system in place, in float or double: the algorithm of
// app/compute/small_solve.py (Gaussian elimination with partial pivoting, back substitution).
// m: N*N values, row-major (overwritten); x: the right-hand side, becomes the solution.
#pragma once

template <int N, class T>
__device__ void small_solve(T* m, T* x)
{
    for (int k = 0; k < N; ++k) {
        int pivot = k;
        T best = fabs(m[k * N + k]);
        for (int i = k + 1; i < N; ++i)
            if (fabs(m[i * N + k]) > best) { pivot = i; best = fabs(m[i * N + k]); }
        if (pivot != k) {
            for (int j = 0; j < N; ++j) { const T t = m[k * N + j]; m[k * N + j] = m[pivot * N + j]; m[pivot * N + j] = t; }
            const T t = x[k]; x[k] = x[pivot]; x[pivot] = t;
        }
        for (int i = k + 1; i < N; ++i) {
            const T factor = m[i * N + k] / m[k * N + k];
            for (int j = k + 1; j < N; ++j) m[i * N + j] -= factor * m[k * N + j];
            x[i] -= factor * x[k];
        }
    }
    for (int k = N - 1; k >= 0; --k) {
        T total = x[k];
        for (int j = k + 1; j < N; ++j) total -= m[k * N + j] * x[j];
        x[k] = total / m[k * N + k];
    }
}
