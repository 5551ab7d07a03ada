// One step of a Rosenbrock method in one thread, in double: the algorithm of
// app/sims/cardiac/rosenbrock.py (rosenbrock_step; Hairer & Wanner's transformed form for an
// autonomous problem), the matrix I/(h gamma) - J factored once (small_solve.cuh's LU with
// partial pivoting) and solved for every stage:
//     (I/(h gamma) - J) U_i = f(y0 + sum_j A_ij U_j) + sum_j (C_ij / h) U_j
//     y_high = y0 + sum_i M_i U_i,   y_low = y0 + sum_i MLOW_i U_i
// The tableau (ROS_STAGES, ROS_GAMMA, ROS_A, ROS_C, ROS_M, ROS_MLOW) is printed from the Python
// definition (app/sims/cardiac/cuda.py, rosenbrock_source) before this header is included.
// The caller gives the scratch for the matrix (N*N doubles) and the stages (ROS_STAGES*N): in
// global memory on the GPU (N = 67: 40 KB, which as local memory the driver would reserve for
// every thread the device can hold), 2N more doubles are local. One thread per cell.
#pragma once
#include "small_solve.cuh"

// field_and_jacobian(f0, jac): dy/dt at y0 and the dense Jacobian (row-major N*N) there;
// rhs(y, f): dy/dt at y. A Jacobian column holding NaN or inf is replaced by forward differences
// (ROS_DIFF_STEP); a singular matrix or a NaN gives NaN in y_high and y_low (rejected).
template <int N, class FieldJacobian, class Rhs>
__device__ void rosenbrock_step(const double* y0, const double h, double* y_high, double* y_low,
                                double* __restrict__ m, double (* __restrict__ u)[N],
                                FieldJacobian field_and_jacobian, Rhs rhs)
{
    double ys[N], fs[N];
    int piv[N];
    field_and_jacobian(fs, m);
    for (int j = 0; j < N; ++j) {      // a column with NaN or inf: forward differences (mend_jacobian)
        bool finite = true;
        for (int i = 0; i < N; ++i) finite = finite && isfinite(m[i * N + j]);
        if (!finite) {
            for (int q = 0; q < N; ++q) ys[q] = y0[q];
            ys[j] = y0[j] + ROS_DIFF_STEP * fmax(1.0, fabs(y0[j]));
            rhs(ys, u[0]);
            for (int i = 0; i < N; ++i) m[i * N + j] = (u[0][i] - fs[i]) / (ys[j] - y0[j]);
        }
    }
    const double diag = 1.0 / (h * ROS_GAMMA);
    for (int i = 0; i < N * N; ++i) m[i] = -m[i];
    for (int i = 0; i < N; ++i) m[i * N + i] += diag;
    lu_factor<N>(m, piv);
    for (int s = 0; s < ROS_STAGES; ++s) {
        if (s > 0) {
            for (int q = 0; q < N; ++q) {
                double acc = 0;
                for (int j = 0; j < s; ++j)
                    if (ROS_A[s][j] != 0.0) acc += ROS_A[s][j] * u[j][q];
                ys[q] = y0[q] + acc;
            }
            rhs(ys, fs);
        }
        for (int q = 0; q < N; ++q) {
            double acc = 0;
            for (int j = 0; j < s; ++j)
                if (ROS_C[s][j] != 0.0) acc += (ROS_C[s][j] / h) * u[j][q];
            u[s][q] = fs[q] + acc;
        }
        lu_solve<N>(m, piv, u[s]);
    }
    for (int q = 0; q < N; ++q) {
        double hi = 0, lo = 0;
        for (int s = 0; s < ROS_STAGES; ++s) {
            if (ROS_M[s] != 0.0) hi += ROS_M[s] * u[s][q];
            if (ROS_MLOW[s] != 0.0) lo += ROS_MLOW[s] * u[s][q];
        }
        y_high[q] = y0[q] + hi;
        y_low[q] = y0[q] + lo;
    }
}
