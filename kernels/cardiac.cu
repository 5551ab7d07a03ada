// Cardiac tissue: Runge-Kutta stages with Rush-Larsen gates, one kernel per stage, the step's
// error reduced on the device, step control and recording in a one-block control kernel.
//
// Filled in by app/sims/cardiac/cuda.py (app.compute.codegen.fill_template) before compiling:
//   MODEL slot   model_rates(): the imported cell model printed from its expression tree, and
//                GATE_TABLE[g]: gate g's outputs are its RLFE update's coefficients (x <- a x + b)
//   TABLEAU slot NSTAGE, ADAPTIVE, RL, ORDER_LOW and the tableau A, B, BLOW, C
// Defines (-D): REAL (float|double), NPAD (cells padded to 32), NCELLS, KNB (neighbour width),
//   STAGE_BLOCK (threads per block), STAGE_MIN_BLOCKS (0: no launch bounds),
//   NPROBE, NSTIM; the model's NS (states), NNG (non-gating states, V first), NG (gates),
//   NPARAM (parameters, in c_params), NVARY (parameters that differ between cells, in pfield).
//
// Layout (structure of arrays): state v of cell k at Y[v*NPAD + k]; stage i's derivatives at
// K[(i*NK + q)*NPAD + k] (q < NNG: non-gating dy/dt, then NG a's, then NG b's, with
// dx/dt = a*x + b for a gate x); a varying parameter j of cell k at pfield[j*NPAD + k].
#include "reduce.cuh"

#ifndef REAL
#define REAL float
#endif
typedef REAL real;

#define NK (NNG + 2 * NG)
#define V_LIMIT 200.0

__constant__ real c_params[NPARAM > 0 ? NPARAM : 1];

{{MODEL}}

{{TABLEAU}}

// control block (double part / int part)
enum { CD_T = 0, CD_H, CD_TPREV, CD_NEXTSAVE, CD_BADT, CD_HPROP, CD_ERR, CD_N };  // CD_ERR: u64
enum { CI_PARITY = 0, CI_DONE, CI_ACC, CI_REJ, CI_NREC, CI_STATUS, CI_BADCELL, CI_BP, CI_NH, CI_N };
enum { ST_OK = 0, ST_BLOWUP = 1, ST_FLOOR = 2 };
// solver constants
enum { CS_AT = 0, CS_RT, CS_DTMIN, CS_DTMAX, CS_SAFETY, CS_FACMIN, CS_FACMAX, CS_TEND, CS_D,
       CS_DTSAVE, CS_THRESH, CS_SAVEEVERY, CS_N };

__constant__ double c_stim[32 * 5];  // MAX_STIMULI (config.py) x start, duration, amplitude, period, count
__constant__ double c_solver[CS_N];

// The old state again, from memory: a volatile load the compiler cannot merge with the first
// one, so the NS old values need not stay in registers through the whole cell model (they are
// in L1). For a 41-state model in double that is 82 registers.
__device__ __forceinline__ double reload(const double* p)
{
    double v;
    asm volatile("ld.global.f64 %0, [%1];" : "=d"(v) : "l"(p));
    return v;
}
__device__ __forceinline__ float reload(const float* p)
{
    float v;
    asm volatile("ld.global.f32 %0, [%1];" : "=f"(v) : "l"(p));
    return v;
}

__device__ __forceinline__ real phi1(real z)
{
    return fabs(z) < (real)1e-5 ? (real)1 + (real)0.5 * z : expm1(z) / z;
}

__device__ __forceinline__ real stim_current(unsigned mask, double t)
{
    real s = 0;
#pragma unroll
    for (int g = 0; g < NSTIM; ++g) {
        if (!((mask >> g) & 1u)) continue;
        const double start = c_stim[5 * g], dur = c_stim[5 * g + 1], period = c_stim[5 * g + 3];
        const double k = floor((t - start) / period);
        if (t >= start && k < c_stim[5 * g + 4] && t - start - k * period < dur) s += (real)c_stim[5 * g + 2];
    }
    return s;
}

__device__ __forceinline__ real diffusion(const real* __restrict__ v, int k, real vk,
                                          const int* __restrict__ nbr, const real* __restrict__ w)
{
    real acc = 0;
#pragma unroll
    for (int q = 0; q < KNB; ++q) {
        const int j = nbr[q * NPAD + k];
        acc += w[q * NPAD + k] * (v[j] - vk);
    }
    return (real)c_solver[CS_D] * acc;
}

// Activation / APD90 bookkeeping on an accepted state (t, v) after (t_prev, v_last).
__device__ __forceinline__ void observe(int k, double t, double t_prev, real v, real* __restrict__ maps)
{
    real* v_last = maps;
    real* act_first = maps + NPAD;
    real* act_last = maps + 2 * NPAD;
    real* vmax = maps + 3 * NPAD;
    real* t_rep = maps + 4 * NPAD;
    real* v_rest = maps + 5 * NPAD;
    const real v0 = v_last[k];
    const real thr = (real)c_solver[CS_THRESH];
    if (t > t_prev) {
        if (v0 < thr && v >= thr) {
            const real tc = (real)(t_prev + (double)((thr - v0) / (v - v0)) * (t - t_prev));
            if (isnan(act_first[k])) act_first[k] = tc;
            act_last[k] = tc;
        }
        if (!isnan(act_first[k]) && isnan(t_rep[k])) {
            const real vm = fmax(vmax[k], v);
            vmax[k] = vm;
            const real v90 = vm - (real)0.9 * (vm - v_rest[k]);
            if (v0 > v90 && v <= v90 && vm > thr)
                t_rep[k] = (real)(t_prev + (double)((v0 - v90) / (v0 - v)) * (t - t_prev));
        }
    }
    v_last[k] = v;
}

// Stage I of a step: build the stage state from Y0 and the stored stages, evaluate the model,
// then store k_I and the next stage's V, or (last stage) write y_high and the error.
template <int I>
__device__ __forceinline__ void stage_body(const real* __restrict__ YA, real* __restrict__ YB,
    real* __restrict__ K, const real* __restrict__ Vin, real* __restrict__ Vout,
    const int* __restrict__ nbr, const real* __restrict__ w, const unsigned* __restrict__ mask,
    real* __restrict__ maps, double* __restrict__ cd, int* __restrict__ ci,
    const real* __restrict__ pfield)
{
    if (ci[CI_DONE]) return;
    const int k = blockIdx.x * blockDim.x + threadIdx.x;
    const int parity = ci[CI_PARITY];
    const real* __restrict__ Y0 = parity ? YB : YA;
    real* __restrict__ Yn = parity ? (real*)YA : YB;
    const double t = cd[CD_T];
    const real h = (real)cd[CD_H];
    float err = 0.f;
    const real* __restrict__ Vd = (I == 0) ? Y0 : Vin;     // V of this stage, all cells
    if (k < NCELLS) {
        real y0[NS];
#pragma unroll
        for (int q = 0; q < NS; ++q) y0[q] = Y0[q * NPAD + k];
        if (I == 0) {
            if (!(fabs(y0[0]) <= (real)V_LIMIT)) {
                if (atomicCAS(&ci[CI_STATUS], ST_OK, ST_BLOWUP) == ST_OK) {
                    ci[CI_BADCELL] = k;
                    cd[CD_BADT] = t;
                }
                ci[CI_DONE] = 1;
            }
            observe(k, t, cd[CD_TPREV], y0[0], maps);
        }
        // stage state
        real ys[NS];
        if (I == 0) {
#pragma unroll
            for (int q = 0; q < NS; ++q) ys[q] = y0[q];
        } else {
#pragma unroll
            for (int q = 0; q < NNG; ++q) {
                real acc = 0;
#pragma unroll
                for (int j = 0; j < I; ++j)
                    if (TAB_A[I][j] != 0.0) acc += (real)TAB_A[I][j] * K[(j * NK + q) * NPAD + k];
                ys[q] = y0[q] + h * acc;
            }
#pragma unroll
            for (int g = 0; g < NG; ++g) {
                real abar = 0, bbar = 0;
#pragma unroll
                for (int j = 0; j < I; ++j) {
                    if (TAB_A[I][j] == 0.0) continue;
                    const real a = K[(j * NK + NNG + g) * NPAD + k];
                    const real b = K[(j * NK + NNG + NG + g) * NPAD + k];
                    abar += (real)TAB_A[I][j] * a;
                    bbar += (real)TAB_A[I][j] * b;
                }
                const real w0 = y0[NNG + g];
                ys[NNG + g] = RL ? w0 + h * (abar * w0 + bbar) * phi1(h * abar)
                                 : w0 + h * bbar;   // non-RL: b holds the gate's derivative
            }
        }
        // rates
        const double ts = t + TAB_C[I] * (double)h;
        real kk[NK];
        const real i_st = stim_current(mask[k], ts);
        // the rest of the stage, after the model: in each branch of a table model (so the
        // outputs are used where they are made, not kept live across a join)
        auto finish = [&]() {
            if (NCELLS > 1) kk[0] += diffusion(Vd, k, ys[0], nbr, w);
            if (!RL) {   // plain RK on the gates: store the derivative as b with a = 0
#pragma unroll
                for (int g = 0; g < NG; ++g) {
                    kk[NNG + NG + g] = kk[NNG + g] * ys[NNG + g] + kk[NNG + NG + g];
                    kk[NNG + g] = 0;
                }
            }
            if (I < NSTAGE - 1) {
#pragma unroll
                for (int q = 0; q < NK; ++q) K[(I * NK + q) * NPAD + k] = kk[q];
                // the next stage's V, needed by the neighbours' diffusion
                real acc = 0;
#pragma unroll
                for (int j = 0; j < I; ++j)
                    if (TAB_A[I + 1][j] != 0.0) acc += (real)TAB_A[I + 1][j] * K[(j * NK) * NPAD + k];
                acc += (real)TAB_A[I + 1][I] * kk[0];
                Vout[k] = y0[0] + h * acc;
            } else {
                // final combination: high (kept) and low (error)
#pragma unroll
                for (int q = 0; q < NS; ++q) {
                    real hi_ab = 0, hi_b = 0, lo_ab = 0, lo_b = 0;
                    const bool gate = q >= NNG;
#pragma unroll
                    for (int j = 0; j < NSTAGE; ++j) {
                        if (TAB_B[j] == 0.0 && (!ADAPTIVE || TAB_BLOW[j] == 0.0)) continue;
                        real a, b;
                        if (j == I) {
                            a = gate ? kk[q] : 0;
                            b = gate ? kk[NG + q] : kk[q];
                        } else {
                            a = gate ? K[(j * NK + q) * NPAD + k] : 0;
                            b = gate ? K[(j * NK + NG + q) * NPAD + k] : K[(j * NK + q) * NPAD + k];
                        }
                        hi_ab += (real)TAB_B[j] * a;
                        hi_b += (real)TAB_B[j] * b;
                        if (ADAPTIVE) {
                            lo_ab += (real)TAB_BLOW[j] * a;
                            lo_b += (real)TAB_BLOW[j] * b;
                        }
                    }
                    real hi, lo = 0;
                    const real yq = reload(Y0 + q * NPAD + k);   // not yq: see reload()
                    if (gate && RL && GATE_TABLE[gate ? q - NNG : 0]) {
                        hi = hi_ab * yq + hi_b;    // RLFE only: the model gave exp(h a) and b expm1(h a)/a
                    } else if (gate && RL) {
                        hi = yq + h * (hi_ab * yq + hi_b) * phi1(h * hi_ab);
                        if (ADAPTIVE) lo = yq + h * (lo_ab * yq + lo_b) * phi1(h * lo_ab);
                    } else {
                        hi = yq + h * hi_b;
                        if (ADAPTIVE) lo = yq + h * lo_b;
                    }
                    Yn[q * NPAD + k] = hi;
                    if (ADAPTIVE) {
                        float e = (float)(fabs(hi - lo) / ((real)c_solver[CS_AT] + (real)c_solver[CS_RT] * fabs(yq)));
                        if (!(e <= 3.0e38f)) e = 3.0e38f;          // NaN or inf: reject
                        err = fmaxf(err, e);
                    }
                }
            }
        };
#if MODEL_TABLES
        if (model_in_table(ys[0])) { model_rates_table(ys, i_st, pfield, k, kk); finish(); }
        else { model_rates_direct(ys, i_st, pfield, k, kk); finish(); }
#else
        model_rates(ys, i_st, pfield, k, kk);
        finish();
#endif
    }
    if (ADAPTIVE && I == NSTAGE - 1) {
        // block max of (error bits << 32 | cell), then one atomic per block: positive floats
        // order as unsigned ints, so the maximum carries the worst cell along
        __shared__ unsigned long long smax[32];
        unsigned long long m = ((unsigned long long)__float_as_uint(err) << 32) | (unsigned)(k < NCELLS ? k : 0);
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) {
            const unsigned long long other = __shfl_down_sync(0xffffffffu, m, o);
            m = other > m ? other : m;
        }
        if ((threadIdx.x & 31) == 0) smax[threadIdx.x >> 5] = m;
        __syncthreads();
        if (threadIdx.x < 32) {
            m = threadIdx.x < (blockDim.x >> 5) ? smax[threadIdx.x] : 0ull;
#pragma unroll
            for (int o = 16; o > 0; o >>= 1) {
                const unsigned long long other = __shfl_down_sync(0xffffffffu, m, o);
                m = other > m ? other : m;
            }
            if (threadIdx.x == 0) atomicMax((unsigned long long*)(cd + CD_ERR), m);
        }
    }
}

#define STAGE_ARGS const real* __restrict__ YA, real* __restrict__ YB, real* __restrict__ K, \
    const real* __restrict__ Vin, real* __restrict__ Vout, const int* __restrict__ nbr,        \
    const real* __restrict__ w, const unsigned* __restrict__ mask, real* __restrict__ maps,     \
    double* __restrict__ cd, int* __restrict__ ci, const real* __restrict__ pfield
#define STAGE_PASS YA, YB, K, Vin, Vout, nbr, w, mask, maps, cd, ci, pfield
// STAGE_MIN_BLOCKS > 0: at least that many blocks of STAGE_BLOCK threads per SM (ptxas caps the
// registers, spilling the rest): occupancy against spills for large float64 models
#if defined(STAGE_MIN_BLOCKS) && STAGE_MIN_BLOCKS > 0
#define STAGE_BOUNDS __launch_bounds__(STAGE_BLOCK, STAGE_MIN_BLOCKS)
#else
#define STAGE_BOUNDS
#endif

extern "C" __global__ void STAGE_BOUNDS stage0(STAGE_ARGS) { stage_body<0>(STAGE_PASS); }
#if NSTAGE > 1
extern "C" __global__ void STAGE_BOUNDS stage1(STAGE_ARGS) { stage_body<1>(STAGE_PASS); }
#endif
#if NSTAGE > 2
extern "C" __global__ void STAGE_BOUNDS stage2(STAGE_ARGS) { stage_body<2>(STAGE_PASS); }
#endif
#if NSTAGE > 3
extern "C" __global__ void STAGE_BOUNDS stage3(STAGE_ARGS) { stage_body<3>(STAGE_PASS); }
#endif
#if NSTAGE > 4
extern "C" __global__ void STAGE_BOUNDS stage4(STAGE_ARGS) { stage_body<4>(STAGE_PASS); }
#endif
#if NSTAGE > 5
extern "C" __global__ void STAGE_BOUNDS stage5(STAGE_ARGS) { stage_body<5>(STAGE_PASS); }
#endif

// One block: accept or reject, new step (Eq. 15), time, parity, recording of the probes.
extern "C" __global__ void control(const real* __restrict__ YA, const real* __restrict__ YB,
    const double* __restrict__ bp, int n_bp, const int* __restrict__ probes,
    double* __restrict__ rec_t, double* __restrict__ rec_v, int rec_cap,
    float* __restrict__ h_hist, int h_cap, double* __restrict__ cd, int* __restrict__ ci)
{
    __shared__ int s_rec, s_slot, s_parity;
    if (threadIdx.x == 0) {
        s_rec = 0;
        if (!ci[CI_DONE]) {
            const double h = cd[CD_H];
            bool accept = true;
            int worst = -1;
            double hprop = h;
            if (ADAPTIVE) {
                const unsigned long long packed = *(unsigned long long*)(cd + CD_ERR);
                *(unsigned long long*)(cd + CD_ERR) = 0ull;
                const float r = __uint_as_float((unsigned)(packed >> 32));
                worst = (int)(packed & 0xffffffffu);
                accept = r <= 1.0f;
                double fac;
                if (!(r < 3.0e38f)) fac = c_solver[CS_FACMIN];
                else if (r <= 0.f) fac = c_solver[CS_FACMAX];
                else fac = fmin(c_solver[CS_FACMAX], fmax(c_solver[CS_FACMIN],
                                c_solver[CS_SAFETY] * pow((double)r, -1.0 / (ORDER_LOW + 1))));
                hprop = h * fac;
            }
            if (accept) {
                cd[CD_TPREV] = cd[CD_T];
                ci[CI_ACC] += 1;
                ci[CI_PARITY] ^= 1;
                if (ADAPTIVE) {
                    cd[CD_T] += h;
                    const int nh = ci[CI_NH];
                    if (nh < h_cap) { h_hist[2 * nh] = (float)cd[CD_T]; h_hist[2 * nh + 1] = (float)h; }
                    ci[CI_NH] = nh + 1;
                } else {
                    cd[CD_T] = ci[CI_ACC] * h;                    // no drift over many steps
                }
            } else {
                ci[CI_REJ] += 1;
            }
            const double t = cd[CD_T], t_end = c_solver[CS_TEND];
            const bool done = ADAPTIVE ? t >= t_end * (1 - 1e-12) : t >= t_end - 0.5 * h;
            if (accept) {
                bool due;
                if (!ADAPTIVE) due = (ci[CI_ACC] % (int)c_solver[CS_SAVEEVERY]) == 0 || done;
                else {
                    const double dts = c_solver[CS_DTSAVE];
                    due = dts == 0.0 || t >= cd[CD_NEXTSAVE] * (1 - 1e-9) || done;
                    if (due && dts > 0.0)
                        while (cd[CD_NEXTSAVE] <= t * (1 + 1e-9)) cd[CD_NEXTSAVE] += dts;
                }
                if (due && ci[CI_NREC] < rec_cap) {
                    s_rec = 1;
                    s_slot = ci[CI_NREC]++;
                    rec_t[s_slot] = t;    // double: at t ~ 1e4 ms float32 cannot resolve upstroke steps
                }
            }
            if (done) ci[CI_DONE] = 1;
            if (ADAPTIVE && !done) {
                cd[CD_HPROP] = hprop;
                if (hprop < c_solver[CS_DTMIN]) {
                    if (ci[CI_STATUS] == ST_OK) { ci[CI_STATUS] = ST_FLOOR; cd[CD_BADT] = t; ci[CI_BADCELL] = worst; }
                    ci[CI_DONE] = 1;
                }
                int i = ci[CI_BP];
                while (i < n_bp && bp[i] <= t * (1 + 1e-12) + 1e-12) ++i;
                ci[CI_BP] = i;
                const double limit = (i < n_bp ? bp[i] : t_end) - t;
                cd[CD_H] = fmin(fmin(hprop, c_solver[CS_DTMAX]), fmin(limit, t_end - t));
            }
        }
        s_parity = ci[CI_PARITY];
    }
    __syncthreads();
    if (s_rec) {
        const real* Y = s_parity ? YB : YA;
        for (int p = threadIdx.x; p < NPROBE; p += blockDim.x)
            rec_v[(size_t)s_slot * NPROBE + p] = (double)Y[probes[p]];
    }
}

// Observe the final state once the run is done (the last accepted step is otherwise unseen).
extern "C" __global__ void observe_final(const real* __restrict__ YA, const real* __restrict__ YB,
    real* __restrict__ maps, const double* __restrict__ cd, const int* __restrict__ ci)
{
    const int k = blockIdx.x * blockDim.x + threadIdx.x;
    if (k >= NCELLS) return;
    const real* Y = ci[CI_PARITY] ? YB : YA;
    observe(k, cd[CD_T], cd[CD_TPREV], Y[k], maps);
}

// The model alone on arbitrary states (tests: CUDA vs NumPy on random states).
// out[q*NPAD + k]: q < NNG non-gating dy/dt, then NG a's, then NG b's.
extern "C" __global__ void eval_rates(const real* __restrict__ Y, const real* __restrict__ ist,
                                      const real* __restrict__ pfield, real* __restrict__ out)
{
    const int k = blockIdx.x * blockDim.x + threadIdx.x;
    if (k >= NCELLS) return;
    real y[NS], o[NK];
#pragma unroll
    for (int q = 0; q < NS; ++q) y[q] = Y[q * NPAD + k];
    model_rates(y, ist[k], pfield, k, o);
#pragma unroll
    for (int q = 0; q < NK; ++q) out[q * NPAD + k] = o[q];
}
