// Solve a small dense linear system in float or double: the algorithm of
// app/compute/small_solve.py (Gaussian elimination with partial pivoting, back substitution),
// split into the factorisation (LU with partial pivoting, in place) and the solve, so that
// several right-hand sides reuse one factorisation (a Rosenbrock step's stages: rosenbrock.cuh).
// m: N*N values, row-major; x: the right-hand side, becomes the solution. A singular matrix
// gives inf or NaN, never a trap.
#pragma once

// m becomes its LU factors (L below the diagonal, unit diagonal implied; U on and above), with
// the rows swapped as piv records: row k was swapped with row piv[k] at column k.
template <int N, class T>
__device__ void lu_factor(T* m, int* piv)
{
    for (int k = 0; k < N; ++k) {
        int pivot = k;
        T best = fabs(m[k * N + k]);
        for (int i = k + 1; i < N; ++i)
            if (fabs(m[i * N + k]) > best) { pivot = i; best = fabs(m[i * N + k]); }
        piv[k] = pivot;
        if (pivot != k)
            for (int j = 0; j < N; ++j) { const T t = m[k * N + j]; m[k * N + j] = m[pivot * N + j]; m[pivot * N + j] = t; }
        for (int i = k + 1; i < N; ++i) {
            const T factor = m[i * N + k] / m[k * N + k];
            m[i * N + k] = factor;
            for (int j = k + 1; j < N; ++j) m[i * N + j] -= factor * m[k * N + j];
        }
    }
}

// x becomes the solution of A x = x, for the factors lu_factor made of A.
template <int N, class T>
__device__ void lu_solve(const T* m, const int* piv, T* x)
{
    for (int k = 0; k < N; ++k)          // the swaps first: L's rows were swapped with them
        if (piv[k] != k) { const T t = x[k]; x[k] = x[piv[k]]; x[piv[k]] = t; }
    for (int k = 0; k < N; ++k)
        for (int i = k + 1; i < N; ++i) x[i] -= m[i * N + k] * x[k];
    for (int k = N - 1; k >= 0; --k) {
        T total = x[k];
        for (int j = k + 1; j < N; ++j) total -= m[k * N + j] * x[j];
        x[k] = total / m[k * N + k];
    }
}

// One system: m is overwritten by its factors.
template <int N, class T>
__device__ void small_solve(T* m, T* x)
{
    int piv[N];
    lu_factor<N>(m, piv);
    lu_solve<N>(m, piv, x);
}
