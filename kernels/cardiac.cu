// Cardiac tissue: Runge-Kutta stages with Rush-Larsen gates, one kernel per stage, the step's
// error reduced on the device. Adaptive methods: step control and recording in a one-block
// control kernel after each step. Fixed steps: no control kernel; the host passes the step's
// index to the stage kernels, which update the state in place; a step the host records is
// recorded by the next step's first stage (from the V it reads anyway), or by `record` where
// no step follows before the host reads the recordings.
//
// Filled in by app/sims/cardiac/cuda.py (app.compute.codegen.fill_template) before compiling:
//   MODEL slot   model_rates(): the imported cell model printed from its expression tree, and
//                GATE_TABLE[g]: gate g's outputs are its RLFE update's coefficients (x <- a x + b)
//   TABLEAU slot NSTAGE, ADAPTIVE, RL, GRL, ORDER_LOW and the tableau A, B, BLOW, C, or a
//                Rosenbrock method's (ROSENBROCK: a single cell's whole step in one thread of
//                steps_one_block, kernels/common/rosenbrock.cuh; the model prints its field and
//                full Jacobian, model_field_and_jacobian, and model_derivative) (GRL: the
//                one-stage generalized Rush-Larsen GRL1; the model also outputs the non-gating
//                states' diagonal Jacobian after the b's, then its blocks' Jacobian entries:
//                MODEL_NJAC outputs in all; model_block_update steps each block (Markov chain, fast group) together)
// Defines (-D): REAL (float|double), NPAD (cells padded to 32), NCELLS, KNB (neighbour width),
//   STAGE_BLOCK (threads per block), STAGE_MIN_BLOCKS (0: no launch bounds),
//   NPROBE, NSTIM, RECORD_STATES (1: a single cell records its every state; the probes are the
//   state rows), SPLIT (1: solver.split_dt, the split step's kernels cell_substeps and rkc_stage),
//   ROW16 (1: the operator row's slots hold int16 offsets from the node, in the engine's node
//   order, not int32 indices), W16 (1: its weights in half precision), the model's NS (states),
//   NNG (non-gating states, V first), NG (gates), NPARAM (parameters, in c_params), NVARY
//   (parameters that differ between cells, in pfield).
//
// Layout (structure of arrays): state v of cell k at Y[v*NPAD + k]; stage i's derivatives at
// K[(i*NK + q)*NPAD + k] (q < NNG: non-gating dy/dt, then NG a's, then NG b's, with
// dx/dt = a*x + b for a gate x); a varying parameter j of cell k at pfield[j*NPAD + k]. A cell k
// is a node's position in the engine's order (the host maps the mesh file's order to it and back);
// slot q of its operator row at nbr[q*NPAD + k] and w[q*NPAD + k] (neighbour(): ROW16 or not;
// row_weight(): W16 or not).
//
// A stage kernel is latency-bound (a cell-step's arithmetic is below its memory traffic), so
// it issues every load a cell-step needs before the model, in as few dependent steps as it
// can: control values; states, stimulus mask, the stored stages, the activation maps, the
// neighbours' indices and weights; the neighbours' V. Only the final update's reloads of the
// old states (see reload()) and, in a multi-stage method's last stage, the stored stages of the
// final combination come after the model.
#include "reduce.cuh"
#include "rush_larsen.cuh"
#include "small_solve.cuh"

#ifndef REAL
#define REAL float
#endif
#ifndef FUSED_STEPS
#define FUSED_STEPS 0
#endif
#ifndef RECORD_STATES
#define RECORD_STATES 0
#endif
#ifndef SPLIT
#define SPLIT 0
#endif
#ifndef ROW16
#define ROW16 0
#endif
#ifndef W16
#define W16 0
#endif
typedef REAL real;
// The operator row's neighbour slots: ROW16, int16 offsets from the node (the nodes in the
// engine's bandwidth-reducing order, app/sims/cardiac/node_order.py); else int32 indices.
#if ROW16
typedef short nbr_t;
#else
typedef int nbr_t;
#endif

__device__ __forceinline__ int neighbour(const nbr_t* __restrict__ nbr, int q, int k)
{
    return ROW16 ? k + (int)nbr[q * NPAD + k] : (int)nbr[q * NPAD + k];
}

// The operator row's weights: W16, IEEE half-precision bits (a float32 run whose rows each round
// within 2^-11 of their largest weight, node_order.row_weight_dtype); else the run's precision.
#if W16
typedef unsigned short weight_t;
#ifndef half_bits_to_float
__device__ __forceinline__ float half_bits_to_float(const unsigned short h)
{
    float f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
    return f;
}
#endif
__device__ __forceinline__ real row_weight(const weight_t* __restrict__ w, int i) { return half_bits_to_float(w[i]); }
#else
typedef real weight_t;
__device__ __forceinline__ real row_weight(const weight_t* __restrict__ w, int i) { return w[i]; }
#endif

#define NK (NNG + 2 * NG)               // the stored outputs of a stage
#define NOUT (NK + MODEL_NJAC)          // the model's outputs (GRL1: and the diagonal Jacobian, the blocks' entries)
#define V_LIMIT 200.0

__constant__ real c_params[NPARAM > 0 ? NPARAM : 1];

{{MODEL}}

{{TABLEAU}}
#ifndef ROSENBROCK
#define ROSENBROCK 0
#endif
#if ROSENBROCK
#include "rosenbrock.cuh"
#endif
#if SPLIT && (ADAPTIVE || NSTAGE != 1)
#error "operator splitting (SPLIT) needs a one-stage fixed-step method"
#endif

// control block (double part / int part)
enum { CD_T = 0, CD_H, CD_TPREV, CD_NEXTSAVE, CD_BADT, CD_HPROP, CD_ERR, CD_PAUSE, CD_N };  // CD_ERR: u64
enum { CI_PARITY = 0, CI_DONE, CI_ACC, CI_REJ, CI_NREC, CI_STATUS, CI_BADCELL, CI_BP, CI_NH, CI_PAUSED, CI_N };
enum { ST_OK = 0, ST_BLOWUP = 1, ST_FLOOR = 2 };
// solver constants
enum { CS_AT = 0, CS_RT, CS_DTMIN, CS_DTMAX, CS_SAFETY, CS_FACMIN, CS_FACMAX, CS_TEND, CS_D,
       CS_DTSAVE, CS_THRESH, CS_H, CS_N };   // CS_H: the fixed step (fixed-step methods)

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
                                          const nbr_t* __restrict__ nbr, const weight_t* __restrict__ w)
{
    real acc = 0;
#pragma unroll
    for (int q = 0; q < KNB; ++q) {
        const int j = neighbour(nbr, q, k);
        acc += row_weight(w, q * NPAD + k) * (v[j] - vk);
    }
    return (real)c_solver[CS_D] * acc;
}

// Activation / APD90 bookkeeping on an accepted state (t, v) after (t_prev, v_last). The maps'
// values are loaded together (Marks, before the model in a stage kernel), the decisions are
// selects and each map is stored only where its value changes.
enum { MAP_V_LAST = 0, MAP_ACT_FIRST, MAP_ACT_LAST, MAP_VMAX, MAP_T_REP, MAP_V_REST, MAP_N };
struct Marks { real v_last, act_first, vmax, t_rep, v_rest; };

__device__ __forceinline__ Marks load_marks(const real* __restrict__ maps, int k)
{
    return {maps[MAP_V_LAST * NPAD + k], maps[MAP_ACT_FIRST * NPAD + k], maps[MAP_VMAX * NPAD + k],
            maps[MAP_T_REP * NPAD + k], maps[MAP_V_REST * NPAD + k]};
}

// t_prev + frac * (t - t_prev) with frac = num / den, in double (float32 cannot resolve a step
// at t ~ 1e4 ms), rounded to the maps' type
__device__ __forceinline__ real crossing(double t_prev, double t, real num, real den)
{
    return (real)(t_prev + (double)(num / den) * (t - t_prev));
}

__device__ __forceinline__ void observe(int k, double t, double t_prev, real v, const Marks m,
                                        real* __restrict__ maps)
{
    const real thr = (real)c_solver[CS_THRESH];
    const bool moved = t > t_prev;
    const bool up = moved && m.v_last < thr && v >= thr;        // activation between the two
    const real t_up = crossing(t_prev, t, thr - m.v_last, v - m.v_last);
    const bool first = up && isnan(m.act_first);
    const real act_first = first ? t_up : m.act_first;
    const bool track = moved && !isnan(act_first) && isnan(m.t_rep);   // activated, not repolarised
    const real vm = fmax(m.vmax, v);
    const real v90 = vm - (real)0.9 * (vm - m.v_rest);
    const bool down = track && m.v_last > v90 && v <= v90 && vm > thr;   // 90 % repolarisation
    const real t_down = crossing(t_prev, t, m.v_last - v90, m.v_last - v);
    if (first) maps[MAP_ACT_FIRST * NPAD + k] = t_up;
    if (up) maps[MAP_ACT_LAST * NPAD + k] = t_up;
    if (track && vm != m.vmax) maps[MAP_VMAX * NPAD + k] = vm;
    if (down) maps[MAP_T_REP * NPAD + k] = t_down;
    if (!(v == m.v_last)) maps[MAP_V_LAST * NPAD + k] = v;
}

// Adaptive steps keep the step's start (YA or YB, by the control block's parity) until the
// step is accepted; fixed steps update YA in place (the host passes it as YB too), which halves
// the state's memory and lets more of it stay in L2 between steps (ORd float32 on the level-7
// sphere: 40 -> 27 us a step on an H100). A pointer to memory written in place is not restrict.
// FUSED_STEPS (adaptive, every cell in one block): one launch runs many steps, so buffers written
// in the launch are never read through the non-coherent read-only path (no const restrict).
#if ADAPTIVE && !FUSED_STEPS
#define Y_CONST const
#define Y_RESTRICT __restrict__
#define VIN_RESTRICT __restrict__
#else
#define Y_CONST
#define Y_RESTRICT
#define VIN_RESTRICT
#endif
// The step's control values, loaded together: adaptive methods read them from the control
// block (the control kernel decides t, h and the parity); fixed steps take the step's index
// from the launch, t = index * h as the host counts it, and read only the stop flag.
struct StepControl { int done, parity; double t, h, t_prev; };

__device__ __forceinline__ StepControl step_control(const double* __restrict__ cd,
                                                    const int* __restrict__ ci, int step)
{
#if ADAPTIVE
    return {ci[CI_DONE], ci[CI_PARITY], cd[CD_T], cd[CD_H], cd[CD_TPREV]};
#else
    const double h = c_solver[CS_H];
    return {ci[CI_DONE], 0, step * h, h, step > 0 ? (step - 1) * h : 0.0};
#endif
}

// The step's error into the control block: the block's max of (error bits << 32 | cell), then
// one atomic per block (positive floats order as unsigned ints, so the maximum carries the
// worst cell along). Every thread of the block calls it.
__device__ __forceinline__ void reduce_error(float err, int k, double* __restrict__ cd)
{
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

// Stage I of a step: build the stage state from Y0 and the stored stages, evaluate the model,
// then store k_I and the next stage's V, or (last stage) write y_high and the error.
template <int I>
__device__ __forceinline__ void stage_body(Y_CONST real* Y_RESTRICT YA, real* Y_RESTRICT YB,
    real* __restrict__ K, const real* VIN_RESTRICT Vin, real* __restrict__ Vout,
    const nbr_t* __restrict__ nbr, const weight_t* __restrict__ w, const unsigned* __restrict__ mask,
    real* __restrict__ maps, double* __restrict__ cd, int* __restrict__ ci,
    const real* __restrict__ pfield, const int* __restrict__ probes, double* __restrict__ rec_t,
    double* __restrict__ rec_v, int step, int rec_slot)
{
    const int k = blockIdx.x * blockDim.x + threadIdx.x;
    const StepControl sc = step_control(cd, ci, step);
    if (sc.done) return;
#if !ADAPTIVE
    if (I == 0 && rec_slot >= 0) {   // the host records the state the last step left (time t)
#if !RECORD_STATES                   // (a single cell's every state: its thread, after its loads)
        if (k < NPROBE) rec_v[(size_t)rec_slot * NPROBE + k] = (double)Vin[probes[k]];
#endif
        if (k == 0) rec_t[rec_slot] = sc.t;
    }
#endif
#if ADAPTIVE
    const real* __restrict__ Y0 = sc.parity ? YB : YA;
    real* __restrict__ Yn = sc.parity ? (real*)YA : YB;
    const real* __restrict__ Vd = (I == 0) ? Y0 : Vin;     // V of this stage, all cells
#else   // in place: a cell reads and writes only its own states; neighbours' V comes from Vin
    const real* Y0 = YA;
    real* Yn = YA;
    const real* __restrict__ Vd = Vin;
#endif
    const double t = sc.t;
    const real h = (real)sc.h;
    float err = 0.f;
    if (k < NCELLS) {
        // ---- the loads (see the head of this file)
        real y0[NS], ys[NS];
        Marks marks;
        real i_diff = 0, v_next = 0;
#pragma unroll
        for (int q = 0; q < NS; ++q) y0[q] = Y0[q * NPAD + k];
#if !ADAPTIVE && RECORD_STATES       // in place: only this thread may read its states before the update
        if (I == 0 && rec_slot >= 0)
            for (int q = 0; q < NS; ++q) rec_v[(size_t)rec_slot * NS + q] = (double)y0[q];
#endif
        if (I == 0) marks = load_marks(maps, k);
        const unsigned stim_mask = mask[k];
        // stage state
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
        if (NCELLS > 1) i_diff = diffusion(Vd, k, ys[0], nbr, w);
        // the next stage's V from the stored stages (this stage's part is added after the model)
        if (I < NSTAGE - 1) {
#pragma unroll
            for (int j = 0; j < I; ++j)
                if (TAB_A[I + 1][j] != 0.0) v_next += (real)TAB_A[I + 1][j] * K[(j * NK) * NPAD + k];
        }
        // ---- the arithmetic
        if (I == 0) {
            if (!(fabs(y0[0]) <= (real)V_LIMIT)) {
                if (atomicCAS(&ci[CI_STATUS], ST_OK, ST_BLOWUP) == ST_OK) {
                    ci[CI_BADCELL] = k;
                    cd[CD_BADT] = t;
                    if (!ADAPTIVE) {    // the host reads the stopped step's counters here
                        ci[CI_ACC] = step;
                        cd[CD_T] = t;
                        cd[CD_TPREV] = sc.t_prev;
                    }
                }
                ci[CI_DONE] = 1;
            }
            observe(k, t, sc.t_prev, y0[0], marks, maps);
        }
        const double ts = t + TAB_C[I] * (double)h;
        real kk[NOUT];
        const real i_st = stim_current(stim_mask, ts);
        // the rest of the stage, after the model: in each branch of a table model (so the
        // outputs are used where they are made, not kept live across a join)
        auto finish = [&]() {
            if (NCELLS > 1) kk[0] += i_diff;
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
                Vout[k] = y0[0] + h * (v_next + (real)TAB_A[I + 1][I] * kk[0]);
            } else {
                // final combination: high (kept) and low (error)
#pragma unroll
                for (int q = 0; q < NS; ++q) {
                    if (GRL && BLOCK_STATE[q]) continue;          // model_block_update, below
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
                    } else if (GRL) {   // GRL1 (one stage): the exact step of the linearisation
                        const real jac = kk[NK + (gate ? 0 : q)];
                        hi = yq + h * hi_b * phi1(isnan(jac) ? (real)0 : h * jac);   // NaN J: forward Euler
                    } else {
                        hi = yq + h * hi_b;
                        if (ADAPTIVE) lo = yq + h * lo_b;
                    }
                    Yn[q * NPAD + k] = hi;
                    if (!ADAPTIVE && q == 0) Vout[k] = hi;      // the next step's V, for the neighbours
                    if (ADAPTIVE) {
                        float e = (float)(fabs(hi - lo) / ((real)c_solver[CS_AT] + (real)c_solver[CS_RT] * fabs(yq)));
                        if (!(e <= 3.0e38f)) e = 3.0e38f;          // NaN or inf: reject
                        err = fmaxf(err, e);
                    }
                }
                if (GRL) {   // each block (Markov chain, fast group) together: linearly implicit Euler
                    model_block_update(kk, y0, Yn, NPAD, k, h);
                    if (BLOCK_STATE[0]) Vout[k] = Yn[k];          // V in a fast group
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
    if (ADAPTIVE && I == NSTAGE - 1) reduce_error(err, k, cd);
}

#define STAGE_ARGS Y_CONST real* Y_RESTRICT YA, real* Y_RESTRICT YB, real* __restrict__ K, \
    const real* __restrict__ Vin, real* __restrict__ Vout, const nbr_t* __restrict__ nbr,        \
    const weight_t* __restrict__ w, const unsigned* __restrict__ mask, real* __restrict__ maps,     \
    double* __restrict__ cd, int* __restrict__ ci, const real* __restrict__ pfield,               \
    const int* __restrict__ probes, double* __restrict__ rec_t, double* __restrict__ rec_v,     \
    int step, int rec_slot
// step, rec_slot: fixed steps only (the accepted steps before this one; the recording slot of
// the state it starts from, or -1); adaptive methods read the step's time from the control
// block and record in the control kernel
#define STAGE_PASS YA, YB, K, Vin, Vout, nbr, w, mask, maps, cd, ci, pfield, probes, rec_t, rec_v, step, rec_slot
// STAGE_MIN_BLOCKS > 0: at least that many blocks of STAGE_BLOCK threads per SM (ptxas caps the
// registers, spilling the rest): occupancy against spills for large float64 models
#if defined(STAGE_MIN_BLOCKS) && STAGE_MIN_BLOCKS > 0
#define STAGE_BOUNDS __launch_bounds__(STAGE_BLOCK, STAGE_MIN_BLOCKS)
#else
#define STAGE_BOUNDS
#endif

#if !FUSED_STEPS && !SPLIT      // (steps_one_block has the stages inline; a split step has its own kernels)
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
#endif

// The probes' V of state Y into row `slot` of the recording, in double (the block's threads).
__device__ __forceinline__ void record_probes(const real* __restrict__ Y, const int* __restrict__ probes,
                                              double* __restrict__ rec_v, int slot)
{
    for (int p = threadIdx.x; p < NPROBE; p += blockDim.x)
        rec_v[(size_t)slot * NPROBE + p] = (double)Y[probes[p]];
}

#if ADAPTIVE
// Adaptive methods, one block after each step: accept or reject, new step (Eq. 15), time,
// parity, recording of the probes.
__device__ __forceinline__ void control_body(const real* YA, const real* YB,
    const double* __restrict__ bp, int n_bp, const int* __restrict__ probes,
    double* __restrict__ rec_t, double* __restrict__ rec_v, int rec_cap,
    float* __restrict__ h_hist, int h_cap, double* __restrict__ cd, int* __restrict__ ci)
{
    __shared__ int s_rec, s_slot, s_parity;
    if (threadIdx.x == 0) {
        s_rec = 0;
        if (!ci[CI_DONE]) {
            const double h = cd[CD_H];
            const unsigned long long packed = *(unsigned long long*)(cd + CD_ERR);
            *(unsigned long long*)(cd + CD_ERR) = 0ull;
            const float r = __uint_as_float((unsigned)(packed >> 32));
            const int worst = (int)(packed & 0xffffffffu);
            const bool accept = r <= 1.0f;
            double fac;
            if (!(r < 3.0e38f)) fac = c_solver[CS_FACMIN];
            else if (r <= 0.f) fac = c_solver[CS_FACMAX];
            else fac = fmin(c_solver[CS_FACMAX], fmax(c_solver[CS_FACMIN],
                            c_solver[CS_SAFETY] * pow((double)r, -1.0 / (ORDER_LOW + 1))));
            const double hprop = h * fac;
            if (accept) {
                cd[CD_TPREV] = cd[CD_T];
                ci[CI_ACC] += 1;
                ci[CI_PARITY] ^= 1;
                cd[CD_T] += h;
                const int nh = ci[CI_NH];
                if (nh < h_cap) { h_hist[2 * nh] = (float)cd[CD_T]; h_hist[2 * nh + 1] = (float)h; }
                ci[CI_NH] = nh + 1;
            } else {
                ci[CI_REJ] += 1;
            }
            const double t = cd[CD_T], t_end = c_solver[CS_TEND];
            const bool done = t >= t_end * (1 - 1e-12);
            if (accept) {
                const double dts = c_solver[CS_DTSAVE];
                const bool due = dts == 0.0 || t >= cd[CD_NEXTSAVE] * (1 - 1e-9) || done;
                if (due && dts > 0.0)
                    while (cd[CD_NEXTSAVE] <= t * (1 + 1e-9)) cd[CD_NEXTSAVE] += dts;
                if (due && ci[CI_NREC] < rec_cap) {
                    s_rec = 1;
                    s_slot = ci[CI_NREC]++;
                    rec_t[s_slot] = t;    // double: at t ~ 1e4 ms float32 cannot resolve upstroke steps
                }
            }
            if (done) ci[CI_DONE] = 1;
            else {
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
                // a readout is due (the host's time in CD_PAUSE): the launches left in the chunk
                // do nothing; the host reads V at this step, then clears both flags
                if (accept && !ci[CI_DONE] && t >= cd[CD_PAUSE] * (1 - 1e-9)) {
                    ci[CI_DONE] = 1;
                    ci[CI_PAUSED] = 1;
                }
            }
        }
        s_parity = ci[CI_PARITY];
    }
    __syncthreads();
    if (s_rec) record_probes(s_parity ? YB : YA, probes, rec_v, s_slot);
}

#define CONTROL_ARGS const double* __restrict__ bp, int n_bp, const int* __restrict__ probes, \
    double* __restrict__ rec_t, double* __restrict__ rec_v, int rec_cap, float* __restrict__ h_hist, \
    int h_cap, double* __restrict__ cd, int* __restrict__ ci

extern "C" __global__ void control(const real* __restrict__ YA, const real* __restrict__ YB, CONTROL_ARGS)
{
    control_body(YA, YB, bp, n_bp, probes, rec_t, rec_v, rec_cap, h_hist, h_cap, cd, ci);
}

#if FUSED_STEPS
// Stages I.. of one step in one block, a block barrier after each (where a kernel boundary was);
// stage I reads the neighbours' V from Vst[I % 2] and writes the other slot, as the host's slots.
template <int I>
__device__ __forceinline__ void block_stages(real* YA, real* YB, real* __restrict__ K, real* V0, real* V1,
    const nbr_t* __restrict__ nbr, const weight_t* __restrict__ w, const unsigned* __restrict__ mask,
    real* __restrict__ maps, double* __restrict__ cd, int* __restrict__ ci, const real* __restrict__ pfield,
    const int* __restrict__ probes, double* __restrict__ rec_t, double* __restrict__ rec_v)
{
    if constexpr (I < NSTAGE) {
        stage_body<I>(YA, YB, K, I % 2 ? V1 : V0, I % 2 ? V0 : V1, nbr, w, mask, maps, cd, ci, pfield,
                      probes, rec_t, rec_v, 0, -1);
        __syncthreads();
        block_stages<I + 1>(YA, YB, K, V0, V1, nbr, w, mask, maps, cd, ci, pfield, probes, rec_t, rec_v);
    }
}

#if ROSENBROCK
// A Rosenbrock step (one cell: NCELLS = 1) in thread 0: the checks and bookkeeping of stage 0 at
// the step's start, the stimulus at the step's middle (no step crosses a pulse edge, so it is
// constant; the middle is inside the step even where t + h misses an edge by an ulp), the whole step (rosenbrock.cuh) with the model's field and full Jacobian, y_high
// into the other state buffer and the error into the control block, as a Runge-Kutta step's
// last stage leaves them for control_body.
// K: the matrix and the stages (NS*NS + ROS_STAGES*NS doubles, cuda.py allocates them).
__device__ __forceinline__ void rosenbrock_body(real* YA, real* YB, double* __restrict__ K,
    const unsigned* __restrict__ mask, real* __restrict__ maps, double* __restrict__ cd, int* __restrict__ ci,
    const real* __restrict__ pfield)
{
    const int k = threadIdx.x;
    const StepControl sc = step_control(cd, ci, 0);
    if (sc.done) return;           // the same for every thread (read after a barrier)
    const real* Y0 = sc.parity ? YB : YA;         // written in this launch: no read-only path
    real* Yn = sc.parity ? YA : YB;
    float err = 0.f;
    if (k < NCELLS) {
        double y0[NS], hi[NS], lo[NS];
        for (int q = 0; q < NS; ++q) y0[q] = Y0[q * NPAD + k];
        if (!(fabs(y0[0]) <= V_LIMIT)) {
            if (atomicCAS(&ci[CI_STATUS], ST_OK, ST_BLOWUP) == ST_OK) { ci[CI_BADCELL] = k; cd[CD_BADT] = sc.t; }
            ci[CI_DONE] = 1;
        }
        observe(k, sc.t, sc.t_prev, y0[0], load_marks(maps, k), maps);
        const double i_st = stim_current(mask[k], sc.t + 0.5 * sc.h);
        rosenbrock_step<NS>(y0, sc.h, hi, lo, K, (double (*)[NS])(K + NS * NS),
            [&](double* f, double* jac) { model_field_and_jacobian(y0, i_st, pfield, k, f, jac); },
            [&](const double* y, double* f) { model_derivative(y, i_st, pfield, k, f); });
        for (int q = 0; q < NS; ++q) {
            Yn[q * NPAD + k] = hi[q];
            float e = (float)(fabs(hi[q] - lo[q]) / (c_solver[CS_AT] + c_solver[CS_RT] * fabs(y0[q])));
            if (!(e <= 3.0e38f)) e = 3.0e38f;          // NaN or inf: reject
            err = fmaxf(err, e);
        }
    }
    reduce_error(err, k, cd);
}
#endif

// Every cell in this one block: up to n_steps steps (accepted or rejected) in one launch, the
// stages and the control as the separate kernels do them, without a launch per stage and step.
extern "C" __global__ void __launch_bounds__(STAGE_BLOCK) steps_one_block(real* YA, real* YB,
    real* __restrict__ K, real* V0, real* V1, const nbr_t* __restrict__ nbr, const weight_t* __restrict__ w,
    const unsigned* __restrict__ mask, real* __restrict__ maps, const real* __restrict__ pfield,
    CONTROL_ARGS, int n_steps)
{
    for (int s = 0; s < n_steps; ++s) {
        if (*(volatile int*)(ci + CI_DONE)) break;      // the same for every thread: read after a barrier
#if ROSENBROCK
        rosenbrock_body(YA, YB, K, mask, maps, cd, ci, pfield);
        __syncthreads();
#else
        block_stages<0>(YA, YB, K, V0, V1, nbr, w, mask, maps, cd, ci, pfield, probes, rec_t, rec_v);
#endif
        control_body(YA, YB, bp, n_bp, probes, rec_t, rec_v, rec_cap, h_hist, h_cap, cd, ci);
        __syncthreads();
    }
}
#endif
#else
// Fixed steps: record the probes of the state at time t in the host's slot, unless the run has
// stopped (the host launches it for a recorded step no stage kernel follows before its read).
extern "C" __global__ void record(const real* __restrict__ Y,
    const int* __restrict__ probes, double* __restrict__ rec_t, double* __restrict__ rec_v,
    const int* __restrict__ ci, double t, int slot)
{
    if (ci[CI_DONE]) return;
    if (threadIdx.x == 0) rec_t[slot] = t;
    record_probes(Y, probes, rec_v, slot);
}

#if SPLIT
// ---- Operator splitting (solver.split_dt, app/sims/cardiac/splitting.py): a split step is the
// cell model alone by n_sub substeps of dt (cell_substeps: the states in registers, read and
// written once), and V alone by RKC1 super-steps (rkc_stage: one launch per stage, one pass
// over the operator row touching V only). The host launches them in order (Strang: half a
// super-step, the substeps, half a super-step; stage_cell_substeps does the first half's last
// stage and the substeps in one pass when that half has two stages or more); the split step's
// first kernel checks and observes the state the last split step left (`observe_step` >= 0:
// its index; t its time, t_prev the one before).

__device__ __forceinline__ void split_observe(int k, real v, int step, double t, double t_prev,
    real* __restrict__ maps, double* __restrict__ cd, int* __restrict__ ci)
{
    if (!(fabs(v) <= (real)V_LIMIT)) {
        if (atomicCAS(&ci[CI_STATUS], ST_OK, ST_BLOWUP) == ST_OK) {
            ci[CI_BADCELL] = k;
            cd[CD_BADT] = t;
            ci[CI_ACC] = step;      // the host reads the stopped step's counters here
            cd[CD_T] = t;
            cd[CD_TPREV] = t_prev;
        }
        ci[CI_DONE] = 1;
    }
    observe(k, t, t_prev, v, load_marks(maps, k), maps);
}

// One substep of the one-stage method on a thread's states y (the final update of stage_body
// without diffusion, in registers).
__device__ __forceinline__ void substep_update(real* y, real* kk, const real h)
{
    if (!RL) {
#pragma unroll
        for (int g = 0; g < NG; ++g) {
            kk[NNG + NG + g] = kk[NNG + g] * y[NNG + g] + kk[NNG + NG + g];
            kk[NNG + g] = 0;
        }
    }
    real yn[NS];
#pragma unroll
    for (int q = 0; q < NS; ++q) {
        yn[q] = y[q];
        if (GRL && BLOCK_STATE[q]) continue;          // model_block_update, below
        const bool gate = q >= NNG;
        const real a = gate ? (real)TAB_B[0] * kk[q] : (real)0;
        const real b = (real)TAB_B[0] * (gate ? kk[NG + q] : kk[q]);
        const real yq = y[q];
        if (gate && RL && GATE_TABLE[gate ? q - NNG : 0]) {
            yn[q] = a * yq + b;
        } else if (gate && RL) {
            yn[q] = yq + h * (a * yq + b) * phi1(h * a);
        } else if (GRL) {
            const real jac = kk[NK + (gate ? 0 : q)];
            yn[q] = yq + h * b * phi1(isnan(jac) ? (real)0 : h * jac);
        } else {
            yn[q] = yq + h * b;
        }
    }
    if (GRL) model_block_update(kk, y, yn, 1, 0, h);
#pragma unroll
    for (int q = 0; q < NS; ++q) y[q] = yn[q];
}

// Stage j of an RKC1 super-step of dV/dt = D sum_q w_q (V_nbr(q) - V) at node k: mu u1 + nu u2 +
// mu_t_h L(u1) (u1, u2 the two stages before, vk = u1[k], u2k = u2[k]; mu_t_h = mu~_j times the
// super-step's length). The combination in double, stored in the run's precision.
__device__ __forceinline__ real rkc_value(const int k, const real* u1, const real vk, const real u2k,
    const nbr_t* __restrict__ nbr, const weight_t* __restrict__ w, const double mu, const double nu,
    const double mu_t_h)
{
    double acc = 0;
#pragma unroll
    for (int q = 0; q < KNB; ++q) acc += (double)row_weight(w, q * NPAD + k) * ((double)u1[neighbour(nbr, q, k)] - (double)vk);
    return (real)(mu * (double)vk + nu * (double)u2k + mu_t_h * (c_solver[CS_D] * acc));
}

// The cell model alone over a split step at node k from states y: substep i at time
// (first_substep + i) * dt; the states are written back once.
__device__ __forceinline__ void cell_substeps_at(const int k, real* y, real* YA, const unsigned* __restrict__ mask,
    const real* __restrict__ pfield, const int first_substep, const int n_sub)
{
    const unsigned stim_mask = mask[k];
    const double dt = c_solver[CS_H];
    const real h = (real)dt;
    for (int i = 0; i < n_sub; ++i) {
        real kk[NOUT];
        const real i_st = stim_current(stim_mask, (double)(first_substep + i) * dt);
#if MODEL_TABLES
        if (model_in_table(y[0])) model_rates_table(y, i_st, pfield, k, kk);
        else model_rates_direct(y, i_st, pfield, k, kk);
#else
        model_rates(y, i_st, pfield, k, kk);
#endif
        substep_update(y, kk, h);
    }
#pragma unroll
    for (int q = 0; q < NS; ++q) YA[q * NPAD + k] = y[q];
}

// The cell model alone over a split step (the split step's first kernel under Godunov).
extern "C" __global__ void STAGE_BOUNDS cell_substeps(real* YA, const unsigned* __restrict__ mask,
    real* __restrict__ maps, double* __restrict__ cd, int* __restrict__ ci, const real* __restrict__ pfield,
    int first_substep, int n_sub, int observe_step, double t, double t_prev)
{
    const int k = blockIdx.x * blockDim.x + threadIdx.x;
    if (ci[CI_DONE] || k >= NCELLS) return;
    real y[NS];
#pragma unroll
    for (int q = 0; q < NS; ++q) y[q] = YA[q * NPAD + k];
    if (observe_step >= 0) split_observe(k, y[0], observe_step, t, t_prev, maps, cd, ci);
    cell_substeps_at(k, y, YA, mask, pfield, first_substep, n_sub);
}

// The last stage of the diffusion super-step before the cell model (Strang's first half, of
// two or more stages: u1 is a stage buffer, u2 V itself or the other buffer), then the cell
// model over the split step: one pass over the states and V instead of two.
extern "C" __global__ void STAGE_BOUNDS stage_cell_substeps(real* YA, const unsigned* __restrict__ mask,
    const real* __restrict__ pfield, const real* u1, const real* u2,
    const nbr_t* __restrict__ nbr, const weight_t* __restrict__ w, int* __restrict__ ci,
    double mu, double nu, double mu_t_h, int first_substep, int n_sub)
{
    const int k = blockIdx.x * blockDim.x + threadIdx.x;
    if (ci[CI_DONE] || k >= NCELLS) return;
    real y[NS];
    y[0] = rkc_value(k, u1, u1[k], u2[k], nbr, w, mu, nu, mu_t_h);
#pragma unroll
    for (int q = 1; q < NS; ++q) y[q] = YA[q * NPAD + k];
    cell_substeps_at(k, y, YA, mask, pfield, first_substep, n_sub);
}

// Stage j of an RKC1 super-step (rkc_value) into out: out may be u2 (each cell reads its own
// u2 only), never u1 (the neighbours' values).
extern "C" __global__ void rkc_stage(const real* u1, const real* u2, real* out,
    const nbr_t* __restrict__ nbr, const weight_t* __restrict__ w, real* __restrict__ maps,
    double* __restrict__ cd, int* __restrict__ ci, double mu, double nu, double mu_t_h,
    int observe_step, double t, double t_prev)
{
    const int k = blockIdx.x * blockDim.x + threadIdx.x;
    if (ci[CI_DONE] || k >= NCELLS) return;
    const real vk = u1[k];
    if (observe_step >= 0) split_observe(k, vk, observe_step, t, t_prev, maps, cd, ci);
    out[k] = rkc_value(k, u1, vk, u2[k], nbr, w, mu, nu, mu_t_h);
}
#endif
#endif

// Observe the final state once the run is done (the last accepted step is otherwise unseen).
extern "C" __global__ void observe_final(const real* __restrict__ YA, const real* __restrict__ YB,
    real* __restrict__ maps, const double* __restrict__ cd, const int* __restrict__ ci)
{
    const int k = blockIdx.x * blockDim.x + threadIdx.x;
    if (k >= NCELLS) return;
    const real* Y = ci[CI_PARITY] ? YB : YA;
    observe(k, cd[CD_T], cd[CD_TPREV], Y[k], load_marks(maps, k), maps);
}

// V of every node in the file's order from V in the engine's (position[i]: node i's place), into
// a readout's buffer (so the host does no gather per readout).
extern "C" __global__ void to_file_order(const real* __restrict__ v, const int* __restrict__ position,
                                         real* __restrict__ out)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < NCELLS) out[i] = v[position[i]];
}

// The model alone on arbitrary states (tests: CUDA vs NumPy on random states).
// out[q*NPAD + k]: q < NNG non-gating dy/dt, then NG a's, then NG b's (GRL: then NNG Jacobians).
extern "C" __global__ void eval_rates(const real* __restrict__ Y, const real* __restrict__ ist,
                                      const real* __restrict__ pfield, real* __restrict__ out)
{
    const int k = blockIdx.x * blockDim.x + threadIdx.x;
    if (k >= NCELLS) return;
    real y[NS], o[NOUT];
#pragma unroll
    for (int q = 0; q < NS; ++q) y[q] = Y[q * NPAD + k];
    model_rates(y, ist[k], pfield, k, o);
#pragma unroll
    for (int q = 0; q < NOUT; ++q) out[q * NPAD + k] = o[q];
}
