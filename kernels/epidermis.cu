// Epidermis: subcellular-element cells (Christley et al. 2010) with a gene network, growth and
// division. The model and the order of operations in a step are those of app/sims/epidermis
// (model.py, engine.py); the CPU engine (cpu.py) is the float64 reference.
//
// Storage is the paper's Algorithm 1 layout, structure of arrays with the cell index contiguous:
// pos[3][EPI_E][cap], etype[EPI_E][cap], count[cap], genes[6][cap]; "slot" = k*cap + c.
//
// One force evaluation with the cell list (run.search = 'cell_list'): a Verlet pair list, built
// from a uniform grid with bins at least inter_cutoff + SKIN wide and kept while no element has
// moved more than SKIN/2 since (the CPU engines' rule), so it always holds every pair within the
// cutoff. Whether this evaluation rebuilds is a device word (rebuild) the previous evaluation's
// update set; the rebuild kernels return at once when it is clear.
//   epi_intra     intracellular all pairs (one thread per element, the cell's elements in
//                 shared memory) + basement membrane and wall; on a rebuild also the hash: the
//                 bin of every live element (x, y periodic, clamped otherwise), histogram with
//                 atomics (rank in its bin)
//   epi_scan      (rebuild) exclusive scan of the histogram (4096 bins per block; the last
//                 block to finish scans the block sums)
//   epi_scatter   (rebuild) counting-sort scatter: sorted (x, y, z, cell) and slot
//   epi_binsort   (rebuild) per bin: insertion sort by slot (the atomic ranks are not
//                 deterministic; this makes the summation order, and so every run,
//                 reproducible), bin ranges, histogram cleared for the next build
//   epi_verlet    (rebuild) per sorted element: the reference position and the elements of
//                 other cells within inter_cutoff + SKIN in the 27 neighbouring bins (in bin
//                 order, each row of three bins one contiguous range); more than EPI_LIST of
//                 them: the element scans the bins at every evaluation instead
//   epi_inter_cl  one thread per sorted element: repulsive Morse and contact sums over its
//                 list, then the RK2 stage update of that element, its position for the next
//                 evaluation (the other sorted buffer) and the rebuild test
// With run.search = 'centre_cutoff' (the paper's Algorithm 2 as a reference): epi_centres,
// epi_neighbours (cell pairs with centres closer than centre_cutoff, O(N^2) over cells),
// epi_intra, epi_inter_cc (per element: the elements of the neighbour cells).
// Then epi_genes (midpoint RK2 of the network, means and A held), and after every growth
// interval epi_grow and epi_divide (one warp per dividing cell).
#include "philox.cuh"
#include "reduce.cuh"

#ifndef EPI_E
#define EPI_E 40              // element slots per cell (tissue.max_elements)
#endif
#ifndef EPI_PERIODIC
#define EPI_PERIODIC 1        // 1: x and y periodic (minimum image), 0: no boundary
#endif
#ifndef EPI_GENES
#define EPI_GENES 1           // 0: movement model; 1: gene network on (modes genes, full)
#endif
#ifndef EPI_SEARCH
#define EPI_SEARCH 0          // 0 cell list, 1 centre cutoff
#endif
#ifndef EPI_MAXNB
#define EPI_MAXNB 128         // neighbour cells per cell (centre cutoff search)
#endif
#ifndef EPI_ROWS
#define EPI_ROWS 32           // element rows per block in the per-cell kernels (blockDim.y)
#endif
#define EPI_R ((EPI_E + 31) / 32)           // slots per lane in epi_divide
#ifndef EPI_LIST
#define EPI_LIST 16           // pair-list entries per element (config.DEVICE_LIST_CAP)
#endif
#define SCAN_T 1024
#define SCAN_I 4
#define SCAN_B (SCAN_T * SCAN_I)            // bins per scan block
#define FULL_MASK 0xffffffffu

// ---- constants ---------------------------------------------------------------------------
// Morse terms as -V'(r)/r = (a e^{-r ia} - b e^{-r ib}) / r with a = U0/xi1, ia = 1/xi1,
// b = V0/xi2, ib = 1/xi2.
__constant__ float c_f[24];
#define P_INTRA_A  c_f[0]
#define P_INTRA_IA c_f[1]
#define P_INTRA_B  c_f[2]
#define P_INTRA_IB c_f[3]
#define P_INTER_A  c_f[4]
#define P_INTER_IA c_f[5]
#define P_INTER_B  c_f[6]
#define P_INTER_IB c_f[7]
#define P_MEM_A    c_f[8]
#define P_MEM_IA   c_f[9]
#define P_MEM_B    c_f[10]
#define P_MEM_IB   c_f[11]
#define P_CUT      c_f[12]     // inter_cutoff
#define P_WALL     c_f[13]     // wall stiffness
#define P_BOX      c_f[14]     // L (periodic)
#define P_IBOX     c_f[15]     // 1 / L
#define P_CC2      c_f[16]     // centre_cutoff^2
#define P_DT       c_f[17]
#define P_MOVE2    c_f[18]     // MAX_STEP_MOVE^2
#define P_RMIN     c_f[19]     // R_MIN
#define P_REACH2   c_f[20]     // (inter_cutoff + SKIN)^2: the pair list's radius
#define P_DRIFT2   c_f[21]     // (SKIN/2 less rounding)^2: the largest drift the list allows

// gene network (double): rates, then 8 Hill factors (a, b, c, h) in the order of model.HILLS
__constant__ double c_g[48];
#define G_KA  c_g[0]
#define G_KD  c_g[1]
#define G_DN  c_g[2]
#define G_DD  c_g[3]
#define G_DB  c_g[4]
#define G_DO2 c_g[5]
#define G_DO1 c_g[6]
#define G_DM  c_g[7]
#define G_G   c_g[8]
#define G_DT  c_g[9]
#define G_BOX c_g[10]          // L as a double (exact centroid and growth arithmetic)
#define HILL_BN 0
#define HILL_ON 1
#define HILL_ND 2
#define HILL_VO 3
#define HILL_GO 4
#define HILL_OV 5
#define HILL_AV 6
#define HILL_OM 7

// status words: [0] error bits (1 moved too far / not finite, 2 genes not finite, 4 neighbour
// list overflow), [1] first offending slot (min), [2] offending cell (genes), [3] largest
// neighbour count seen
#define ST_MOVE 1
#define ST_GENES 2
#define ST_NBR 4

// ---- small helpers ------------------------------------------------------------------------
__device__ __forceinline__ float min_image(float d)
{
#if EPI_PERIODIC
    return d - P_BOX * rintf(d * P_IBOX);
#else
    return d;
#endif
}

__device__ __forceinline__ float wrap_box(float x)
{
    float w = x - P_BOX * floorf(x * P_IBOX);
    if (w >= P_BOX) w -= P_BOX;
    if (w < 0.f) w += P_BOX;
    return w >= P_BOX ? 0.f : w;
}

// exact double arithmetic (no contraction into fma), as NumPy evaluates it
__device__ __forceinline__ double min_image_d(double d)
{
#if EPI_PERIODIC
    return __dsub_rn(d, __dmul_rn(G_BOX, rint(__ddiv_rn(d, G_BOX))));
#else
    return d;
#endif
}

__device__ __forceinline__ double wrap_d(double x)   // model.wrap
{
    const double w = __dsub_rn(x, __dmul_rn(G_BOX, floor(__ddiv_rn(x, G_BOX))));
    return w >= G_BOX ? __dsub_rn(w, G_BOX) : w;
}

__device__ __forceinline__ float morse_over_r(float r, float a, float ia, float b, float ib)
{
    return (a * __expf(-r * ia) - b * __expf(-r * ib)) / r;
}

__device__ __forceinline__ double hill(double x, int i)
{
    const double a = c_g[12 + 4 * i], b = c_g[13 + 4 * i], c = c_g[14 + 4 * i], h = c_g[15 + 4 * i];
    return a + b / (1.0 + pow(c * x, h));
}

// centre of cell c from positions P, as model.centroids (float64, x and y unwrapped about
// element 0, averaged, wrapped); the summation order is NumPy's (slot order)
__device__ void centre_d(const float* __restrict__ P, const int c, const int cap, const int n,
                         double out[3])
{
    const int EC = EPI_E * cap;
    const double dn = (double)(n > 0 ? n : 1);
#pragma unroll
    for (int a = 0; a < 3; ++a) {
        const float* q = P + a * EC + c;
        double s = 0.0;
        if (a < 2 && EPI_PERIODIC) {
            const double x0 = q[0];
            for (int k = 0; k < n; ++k) s = __dadd_rn(s, min_image_d(__dsub_rn((double)q[k * cap], x0)));
            out[a] = wrap_d(__dadd_rn(x0, __ddiv_rn(s, dn)));
        } else {
            for (int k = 0; k < n; ++k) s = __dadd_rn(s, (double)q[k * cap]);
            out[a] = __ddiv_rn(s, dn);
        }
    }
}

// grid bin of one coordinate: periodic (wrapped into [0, L), n bins of L/n) or clamped
__device__ __forceinline__ int axis_bin(float v, float origin, float inv_w, int n, bool periodic)
{
    float f;
    if (periodic) f = floorf((v - P_BOX * floorf(v * P_IBOX)) * inv_w);
    else f = floorf((v - origin) * inv_w);
    f = fminf(fmaxf(f, 0.f), (float)(n - 1));          // also maps NaN to 0
    return (int)f;
}

struct GridP { float ox, oy, oz, iwx, iwy, iwz; int nx, ny, nz; };

__device__ __forceinline__ int3 bin3(float x, float y, float z, const GridP& g)
{
    return make_int3(axis_bin(x, g.ox, g.iwx, g.nx, EPI_PERIODIC),
                     axis_bin(y, g.oy, g.iwy, g.ny, EPI_PERIODIC),
                     axis_bin(z, g.oz, g.iwz, g.nz, false));
}

// The end of a force evaluation for one element: total force F at slot; stage 0 stores F
// (forces()), stage 1 the midpoint X + dt/2 F into out, stage 2 the new X + dt F (in place,
// wrapped) with the blow-up check. Contact sums (count, N, D, B) at stages 0 and 1. Returns
// the element's position for the next evaluation (stages 1 and 2).
__device__ __forceinline__ float3 finish(const int stage, const int slot, const int EC,
                                       float fx, float fy, float fz, const float4 cs,
                                       const float* __restrict__ fi, float* X, float* out,
                                       float* __restrict__ contact, int* __restrict__ status)
{
    fx += fi[slot];
    fy += fi[EC + slot];
    fz += fi[2 * EC + slot];
    float3 next = make_float3(0.f, 0.f, 0.f);
    if (stage == 0) {
        out[slot] = fx; out[EC + slot] = fy; out[2 * EC + slot] = fz;
    } else if (stage == 1) {
        const float h = 0.5f * P_DT;
        next = make_float3(X[slot] + h * fx, X[EC + slot] + h * fy, X[2 * EC + slot] + h * fz);
        out[slot] = next.x; out[EC + slot] = next.y; out[2 * EC + slot] = next.z;
    } else {
        const float dt = P_DT;
        const float dx = dt * fx, dy = dt * fy, dz = dt * fz;
        float x = X[slot] + dx, y = X[EC + slot] + dy;
        const float z = X[2 * EC + slot] + dz;
        const float m2 = dx * dx + dy * dy + dz * dz;
        if (!(m2 <= P_MOVE2)) { atomicOr(status, ST_MOVE); atomicMin(status + 1, slot); }
#if EPI_PERIODIC
        x = wrap_box(x);
        y = wrap_box(y);
#endif
        X[slot] = x; X[EC + slot] = y; X[2 * EC + slot] = z;
        next = make_float3(x, y, z);
    }
    if (stage == 0 || (EPI_GENES && stage == 1)) {
        contact[slot] = cs.x; contact[EC + slot] = cs.y;
        contact[2 * EC + slot] = cs.z; contact[3 * EC + slot] = cs.w;
    }
    return next;
}

// one intercellular pair: repulsive Morse below the cutoff, contact sums
__device__ __forceinline__ void inter_pair(const float xi, const float yi, const float zi,
                                           const float xj, const float yj, const float zj,
                                           const int cj, const bool contacts,
                                           const float* __restrict__ genes, const int cap,
                                           float& fx, float& fy, float& fz, float4& cs)
{
    const float dx = min_image(xi - xj), dy = min_image(yi - yj), dz = zi - zj;
    const float r2 = dx * dx + dy * dy + dz * dz;
    const float cut = P_CUT;
    if (!(r2 < cut * cut)) return;               // (NaN distances too, as the CPU engine)
    const float r = sqrtf(r2);
    if (!(r < cut)) return;
    const float f = morse_over_r(fmaxf(r, P_RMIN), P_INTER_A, P_INTER_IA, P_INTER_B, P_INTER_IB);
    if (f > 0.f) { fx += f * dx; fy += f * dy; fz += f * dz; }
    if (contacts) {
        cs.x += 1.f;
        cs.y += __ldg(genes + cj);
        cs.z += __ldg(genes + cap + cj);
        cs.w += __ldg(genes + 2 * cap + cj);
    }
}

// ---- centres and adhesion -----------------------------------------------------------------
// cen[3][cap] (float32 of the float64 centroid) and, when A is not null, the adhesion
// A = sum of |z| over the C1 elements.
extern "C" __global__ void epi_centres(const int n_cells, const int cap, const float* __restrict__ P,
                                       const signed char* __restrict__ etype,
                                       const int* __restrict__ count, float* __restrict__ cen,
                                       double* __restrict__ A)
{
    const int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= n_cells) return;
    const int n = count[c];
    double ctr[3];
    centre_d(P, c, cap, n, ctr);
    cen[c] = (float)ctr[0];
    cen[cap + c] = (float)ctr[1];
    cen[2 * cap + c] = (float)ctr[2];
    if (A) {
        const float* z = P + 2 * EPI_E * cap + c;
        double s = 0.0;
        for (int k = 0; k < n; ++k)
            if (etype[k * cap + c] == 1) s += fabs((double)z[k * cap]);
        A[c] = s;
    }
}

// ---- bounding box (once per slice, to place the grid) -------------------------------------
__device__ __forceinline__ int float_order(float f)
{
    const int i = __float_as_int(f);
    return i >= 0 ? i : i ^ 0x7fffffff;
}

extern "C" __global__ void __launch_bounds__(32 * EPI_ROWS)
epi_bbox(const int n_cells, const int cap, const float* __restrict__ P,
         const int* __restrict__ count, int* __restrict__ bb)
{
    const int c = blockIdx.x * blockDim.x + threadIdx.x;
    const int k = blockIdx.y * blockDim.y + threadIdx.y;
    const bool live = c < n_cells && k < count[c < n_cells ? c : 0];
    const int EC = EPI_E * cap;
    int lo[3], hi[3];
#pragma unroll
    for (int a = 0; a < 3; ++a) {
        const float v = live ? P[a * EC + k * cap + c] : 0.f;
        const bool ok = live && isfinite(v);
        lo[a] = warp_min(ok ? float_order(v) : 0x7fffffff);
        hi[a] = warp_max(ok ? float_order(v) : (int)0x80000000);
    }
    if ((threadIdx.x & 31) == 0) {
#pragma unroll
        for (int a = 0; a < 3; ++a) {
            if (lo[a] != 0x7fffffff) atomicMin(bb + a, lo[a]);
            if (hi[a] != (int)0x80000000) atomicMax(bb + 3 + a, hi[a]);
        }
    }
}

// ---- cell list: scan, scatter, per-bin sort, pair list (the hash is in epi_intra) -------------
// exclusive scan of v over a block of SCAN_T threads; *total gets the block's sum
__device__ __forceinline__ int block_exclusive_scan(const int v, int* total)
{
    __shared__ int warp_tot[SCAN_T / 32];
    const int lane = threadIdx.x & 31, wid = threadIdx.x >> 5;
    int x = v;
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
        const int y = __shfl_up_sync(FULL_MASK, x, o);
        if (lane >= o) x += y;
    }
    if (lane == 31) warp_tot[wid] = x;
    __syncthreads();
    if (wid == 0) {
        int t = warp_tot[lane];
#pragma unroll
        for (int o = 1; o < 32; o <<= 1) {
            const int y = __shfl_up_sync(FULL_MASK, t, o);
            if (lane >= o) t += y;
        }
        warp_tot[lane] = t;
    }
    __syncthreads();
    const int excl = x - v + (wid ? warp_tot[wid - 1] : 0);
    *total = warp_tot[SCAN_T / 32 - 1];
    __syncthreads();
    return excl;
}

// start[b] = exclusive prefix of hist inside its block of SCAN_B bins; bsum[block] = block sum.
// The last block to finish (ticket, zero between launches) turns bsum[0..nblocks) into
// exclusive offsets and bsum[nblocks] into the number of live elements.
extern "C" __global__ void __launch_bounds__(SCAN_T)
epi_scan(const int nbins, const int* __restrict__ hist, int* __restrict__ start, int* bsum,
         unsigned int* __restrict__ ticket, const int* __restrict__ rebuild)
{
    __shared__ bool last;
    if (!*rebuild) return;
    const int base = blockIdx.x * SCAN_B + threadIdx.x * SCAN_I;
    int v[SCAN_I], s = 0;
#pragma unroll
    for (int i = 0; i < SCAN_I; ++i) {
        v[i] = base + i < nbins ? hist[base + i] : 0;
        s += v[i];
    }
    int total;
    int ex = block_exclusive_scan(s, &total);
#pragma unroll
    for (int i = 0; i < SCAN_I; ++i) {
        if (base + i < nbins) start[base + i] = ex;
        ex += v[i];
    }
    if (threadIdx.x == 0) {
        bsum[blockIdx.x] = total;
        __threadfence();
        last = atomicAdd(ticket, 1u) == gridDim.x - 1;
    }
    __syncthreads();
    if (!last) return;
    __threadfence();
    const volatile int* sums = bsum;            // the other blocks' sums, past this SM's L1
    const int nblocks = gridDim.x;
    int carry = 0;
    for (int b0 = 0; b0 < nblocks; b0 += SCAN_T) {
        const int i = b0 + threadIdx.x;
        const int x = i < nblocks ? sums[i] : 0;
        int part;
        const int e = block_exclusive_scan(x, &part);
        if (i < nblocks) bsum[i] = carry + e;
        carry += part;
    }
    if (threadIdx.x == 0) { bsum[nblocks] = carry; *ticket = 0u; }
}

__device__ __forceinline__ int bin_start(const int b, const int* __restrict__ start,
                                         const int* __restrict__ bsum)
{
    return start[b] + bsum[b / SCAN_B];
}

extern "C" __global__ void __launch_bounds__(32 * EPI_ROWS)
epi_scatter(const int n_cells, const int cap, const float* __restrict__ P,
            const int* __restrict__ count, const int* __restrict__ bin,
            const int* __restrict__ rank, const int* __restrict__ start,
            const int* __restrict__ bsum, float4* __restrict__ spos,
            int* __restrict__ sidx, const int* __restrict__ rebuild)
{
    if (!*rebuild) return;
    const int c = blockIdx.x * blockDim.x + threadIdx.x;
    const int k = blockIdx.y * blockDim.y + threadIdx.y;
    if (c >= n_cells || k >= count[c]) return;
    const int EC = EPI_E * cap, slot = k * cap + c;
    const int b = bin[slot];
    const int d = bin_start(b, start, bsum) + rank[slot];
    spos[d] = make_float4(P[slot], P[EC + slot], P[2 * EC + slot], __int_as_float(c));
    sidx[d] = slot;
}

// per bin: sort its entries by slot (insertion sort; bins hold a few elements), store the
// range, clear the histogram for the next evaluation
extern "C" __global__ void epi_binsort(const int nbins, int* __restrict__ hist,
                                       const int* __restrict__ start, const int* __restrict__ bsum,
                                       float4* __restrict__ spos, int* __restrict__ sidx,
                                       int2* __restrict__ range, const int* __restrict__ rebuild)
{
    const int b = blockIdx.x * blockDim.x + threadIdx.x;
    if (b >= nbins || !*rebuild) return;
    const int n = hist[b];
    const int s = bin_start(b, start, bsum);
    range[b] = make_int2(s, s + n);
    hist[b] = 0;
    for (int i = s + 1; i < s + n; ++i) {
        const int key = sidx[i];
        const float4 val = spos[i];
        int j = i - 1;
        while (j >= s && sidx[j] > key) {
            sidx[j + 1] = sidx[j];
            spos[j + 1] = spos[j];
            --j;
        }
        sidx[j + 1] = key;
        spos[j + 1] = val;
    }
}

// ---- intracellular forces, membrane and wall ------------------------------------------------
// Block (32 cells) x (EPI_ROWS rows): the block's cells' elements in shared memory; thread
// (c, row) computes elements k = row, row + EPI_ROWS, ... of cell c over all its elements.
// With the cell list, when the pair list is rebuilt, it also hashes every live element (bin, rank
// in its bin, histogram); the grid arguments are unused with the centre cutoff.
extern "C" __global__ void __launch_bounds__(32 * EPI_ROWS)
epi_intra(const int n_cells, const int cap, const float* __restrict__ P,
          const signed char* __restrict__ etype, const int* __restrict__ count,
          float* __restrict__ fi,
          const float ox, const float oy, const float oz,
          const float iwx, const float iwy, const float iwz,
          const int nx, const int ny, const int nz,
          int* __restrict__ hist, int* __restrict__ bin, int* __restrict__ rank,
          const int* __restrict__ rebuild)
{
    __shared__ float s[3][EPI_E][32];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int c = blockIdx.x * 32 + tx;
    const int EC = EPI_E * cap;
    const int n = c < n_cells ? count[c] : 0;
#if EPI_SEARCH == 0
    const GridP g = {ox, oy, oz, iwx, iwy, iwz, nx, ny, nz};
    const bool hash = *rebuild != 0;
#endif
    for (int k = ty; k < EPI_E; k += EPI_ROWS) {
        const bool live = k < n;
        const int slot = k * cap + c;
        s[0][k][tx] = live ? P[slot] : 0.f;
        s[1][k][tx] = live ? P[EC + slot] : 0.f;
        s[2][k][tx] = live ? P[2 * EC + slot] : 0.f;
#if EPI_SEARCH == 0
        if (live && hash) {
            const int3 b = bin3(s[0][k][tx], s[1][k][tx], s[2][k][tx], g);
            const int h = (b.z * ny + b.y) * nx + b.x;
            bin[slot] = h;
            rank[slot] = atomicAdd(hist + h, 1);
        }
#endif
    }
    __syncthreads();
    const float rmin = P_RMIN;
    for (int k = ty; k < n; k += EPI_ROWS) {
        const float xi = s[0][k][tx], yi = s[1][k][tx], zi = s[2][k][tx];
        float fx = 0.f, fy = 0.f, fz = 0.f;
        for (int j = 0; j < n; ++j) {
            if (j == k) continue;
            const float dx = min_image(xi - s[0][j][tx]);
            const float dy = min_image(yi - s[1][j][tx]);
            const float dz = zi - s[2][j][tx];
            const float r = fmaxf(sqrtf(dx * dx + dy * dy + dz * dz), rmin);
            const float f = morse_over_r(r, P_INTRA_A, P_INTRA_IA, P_INTRA_B, P_INTRA_IB);
            fx += f * dx; fy += f * dy; fz += f * dz;
        }
        // membrane (C1: Morse in z) and wall (any element below z = 0)
        const int slot = k * cap + c;
        if (etype[slot] == 1) {
            const float zc = fmaxf(zi, 1e-6f);
            fz += P_MEM_A * __expf(-zc * P_MEM_IA) - P_MEM_B * __expf(-zc * P_MEM_IB);
        }
        if (zi < 0.f) fz -= P_WALL * zi;
        fi[slot] = fx;
        fi[EC + slot] = fy;
        fi[2 * EC + slot] = fz;
    }
}

// ---- the pair list, and the intercellular forces from it, then the stage update ---------------
// f(lo, hi) for each contiguous range of sorted elements in the 27 bins around bin b (a row of
// three bins is one range, plus the wrapped bin at a periodic edge), in a fixed order
template <class F>
__device__ __forceinline__ void each_near_range(const int3 b, const GridP& g,
                                                const int2* __restrict__ range, F&& f)
{
    const int nx = g.nx, ny = g.ny, nz = g.nz;
    int x0, x1, xw = -1;
#if EPI_PERIODIC
    if (nx < 3) { x0 = 0; x1 = nx - 1; }
    else if (b.x == 0) { x0 = 0; x1 = 1; xw = nx - 1; }
    else if (b.x == nx - 1) { x0 = nx - 2; x1 = nx - 1; xw = 0; }
    else { x0 = b.x - 1; x1 = b.x + 1; }
#else
    x0 = max(b.x - 1, 0); x1 = min(b.x + 1, nx - 1);
#endif
    for (int dz = -1; dz <= 1; ++dz) {
        const int jz = b.z + dz;
        if (jz < 0 || jz >= nz) continue;
        for (int dy = -1; dy <= 1; ++dy) {
            int jy = b.y + dy;
#if EPI_PERIODIC
            if (ny < 3) {
                // ny = 1: only dy = 0; ny = 2: dy = 0 and one neighbour
                if (ny == 1 && dy != 0) continue;
                if (ny == 2 && dy == 1) continue;
            }
            jy = (jy + ny) % ny;
#else
            if (jy < 0 || jy >= ny) continue;
#endif
            const int row = (jz * ny + jy) * nx;
            f(range[row + x0].x, range[row + x1].y);
            if (xw >= 0) {
                const int2 rw = range[row + xw];
                f(rw.x, rw.y);
            }
        }
    }
}

// per sorted element t (rebuild only): sref[t] = its position now; nl[i * stride + t], i < nn[t],
// the sorted elements of other cells within the list radius, in bin order; nn[t] = -1 when
// there are more than EPI_LIST (the element then scans the bins). verlet[2] counts the builds.
extern "C" __global__ void __launch_bounds__(128)
epi_verlet(const int stride,
           const float ox, const float oy, const float oz,
           const float iwx, const float iwy, const float iwz,
           const int nx, const int ny, const int nz,
           const float4* __restrict__ spos, float4* __restrict__ sref,
           const int2* __restrict__ range, const int* __restrict__ total,
           int* __restrict__ nl, int* __restrict__ nn, const int* __restrict__ rebuild,
           int* __restrict__ builds)
{
    if (!*rebuild) return;
    const int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t == 0) atomicAdd(builds, 1);
    if (t >= *total) return;
    const float4 me = spos[t];
    sref[t] = me;
    const int ci = __float_as_int(me.w);
    const GridP g = {ox, oy, oz, iwx, iwy, iwz, nx, ny, nz};
    const float reach2 = P_REACH2;
    int m = 0;
    each_near_range(bin3(me.x, me.y, me.z, g), g, range, [&](const int lo, const int hi) {
        for (int e = lo; e < hi; ++e) {
            const float4 q = spos[e];
            if (__float_as_int(q.w) == ci) continue;
            const float dx = min_image(me.x - q.x), dy = min_image(me.y - q.y), dz = me.z - q.z;
            if (dx * dx + dy * dy + dz * dz < reach2) {
                if (m < EPI_LIST) nl[m * stride + t] = e;
                ++m;
            }
        }
    });
    nn[t] = m <= EPI_LIST ? m : -1;
}

// one thread per sorted element: the forces at the positions spos (this evaluation's sorted
// buffer), the stage update, and (stages 1 and 2) the new position into snext, the other
// buffer, which the next evaluation reads; an element that has drifted more than the list
// allows since the build sets the next evaluation's rebuild word. The evaluation's own word
// is cleared (every kernel reading it has run).
extern "C" __global__ void __launch_bounds__(128)
epi_inter_cl(const int stage, const int cap, const int stride,
             const float ox, const float oy, const float oz,
             const float iwx, const float iwy, const float iwz,
             const int nx, const int ny, const int nz,
             const float4* __restrict__ spos, float4* __restrict__ snext,
             const float4* __restrict__ sref, const int* __restrict__ sidx,
             const int* __restrict__ nl, const int* __restrict__ nn,
             const int2* __restrict__ range, const int* __restrict__ total,
             int* __restrict__ rebuild, int* __restrict__ rebuild_next,
             const float* __restrict__ fi, const float* __restrict__ genes,
             float* X, float* out, float* __restrict__ contact, int* __restrict__ status)
{
    const int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t == 0) *rebuild = 0;
    if (t >= *total) return;
    const float4 me = spos[t];
    const int ci = __float_as_int(me.w);
    const bool contacts = stage == 0 || (EPI_GENES && stage == 1);
    float fx = 0.f, fy = 0.f, fz = 0.f;
    float4 cs = make_float4(0.f, 0.f, 0.f, 0.f);
    const int m = nn[t];
    for (int i = 0; i < m; ++i) {
        const float4 q = spos[nl[i * stride + t]];
        inter_pair(me.x, me.y, me.z, q.x, q.y, q.z, __float_as_int(q.w), contacts, genes, cap,
                   fx, fy, fz, cs);
    }
    const float4 ref = sref[t];
    if (m < 0) {            // a crowded element: the bins of its place at the build
        const GridP g = {ox, oy, oz, iwx, iwy, iwz, nx, ny, nz};
        each_near_range(bin3(ref.x, ref.y, ref.z, g), g, range, [&](const int lo, const int hi) {
            for (int e = lo; e < hi; ++e) {
                const float4 q = spos[e];
                const int cj = __float_as_int(q.w);
                if (cj == ci) continue;
                inter_pair(me.x, me.y, me.z, q.x, q.y, q.z, cj, contacts, genes, cap,
                           fx, fy, fz, cs);
            }
        });
    }
    const float3 next = finish(stage, sidx[t], EPI_E * cap, fx, fy, fz, cs, fi, X, out, contact,
                               status);
    if (stage != 0) {
        snext[t] = make_float4(next.x, next.y, next.z, me.w);
        const float dx = min_image(next.x - ref.x), dy = min_image(next.y - ref.y);
        const float dz = next.z - ref.z;
        if (!(dx * dx + dy * dy + dz * dz <= P_DRIFT2)) *rebuild_next = 1;
    }
}

// ---- centre-cutoff search (the paper's Algorithm 2) -------------------------------------------
// nbr[j*cap + c] (j < nnb[c]): the cells whose centres lie within centre_cutoff of c's
extern "C" __global__ void __launch_bounds__(256)
epi_neighbours(const int n_cells, const int cap, const float* __restrict__ cen,
               int* __restrict__ nbr, int* __restrict__ nnb, int* __restrict__ status)
{
    __shared__ float tile[3][256];
    const int c = blockIdx.x * blockDim.x + threadIdx.x;
    const bool live = c < n_cells;
    const float x = live ? cen[c] : 0.f, y = live ? cen[cap + c] : 0.f, z = live ? cen[2 * cap + c] : 0.f;
    int m = 0;
    for (int base = 0; base < n_cells; base += 256) {
        const int j = base + threadIdx.x;
        tile[0][threadIdx.x] = j < n_cells ? cen[j] : 0.f;
        tile[1][threadIdx.x] = j < n_cells ? cen[cap + j] : 0.f;
        tile[2][threadIdx.x] = j < n_cells ? cen[2 * cap + j] : 0.f;
        __syncthreads();
        const int lim = min(256, n_cells - base);
        if (live) {
            for (int jj = 0; jj < lim; ++jj) {
                const float dx = min_image(x - tile[0][jj]), dy = min_image(y - tile[1][jj]);
                const float dz = z - tile[2][jj];
                if (base + jj != c && dx * dx + dy * dy + dz * dz < P_CC2) {
                    if (m < EPI_MAXNB) nbr[m * cap + c] = base + jj;
                    ++m;
                }
            }
        }
        __syncthreads();
    }
    if (live) {
        nnb[c] = min(m, EPI_MAXNB);
        if (m > EPI_MAXNB) atomicOr(status, ST_NBR);
        atomicMax(status + 3, m);
    }
}

extern "C" __global__ void __launch_bounds__(32 * EPI_ROWS)
epi_inter_cc(const int stage, const int n_cells, const int cap,
             const float* __restrict__ P, const int* __restrict__ count,
             const int* __restrict__ nbr, const int* __restrict__ nnb,
             const float* __restrict__ fi,
             const float* __restrict__ genes, float* X, float* out,
             float* __restrict__ contact, int* __restrict__ status)
{
    const int c = blockIdx.x * blockDim.x + threadIdx.x;
    const int k = blockIdx.y * blockDim.y + threadIdx.y;
    if (c >= n_cells || k >= count[c]) return;
    const int EC = EPI_E * cap, slot = k * cap + c;
    const float xi = P[slot], yi = P[EC + slot], zi = P[2 * EC + slot];
    const bool contacts = stage == 0 || (EPI_GENES && stage == 1);
    float fx = 0.f, fy = 0.f, fz = 0.f;
    float4 cs = make_float4(0.f, 0.f, 0.f, 0.f);
    const int m = nnb[c];
    for (int i = 0; i < m; ++i) {
        const int j = nbr[i * cap + c];
        const int nj = count[j];
        for (int e = 0; e < nj; ++e) {
            const int sj = e * cap + j;
            inter_pair(xi, yi, zi, P[sj], P[EC + sj], P[2 * EC + sj], j, contacts, genes, cap,
                       fx, fy, fz, cs);
        }
    }
    finish(stage, slot, EC, fx, fy, fz, cs, fi, X, out, contact, status);
}

// ---- gene network ----------------------------------------------------------------------------
__device__ __forceinline__ void gene_rhs(const double g[6], const double mN, const double mD,
                                         const double mB, const double A, double out[6])
{
    const double N = g[0], D = g[1], B = g[2], O2 = g[3], O1 = g[4];
    out[0] = -G_KA * N * mD + G_KD * B - G_DN * N + hill(B, HILL_BN) * hill(O2, HILL_ON);
    out[1] = -G_KA * D * mN + G_KD * mB - G_DD * D + hill(N, HILL_ND);
    out[2] = G_KA * N * mD - G_KD * B - G_DB * B;
    out[3] = -G_DO2 * O2 + hill(O1, HILL_VO) * hill(G_G, HILL_GO);
    out[4] = -G_DO1 * O1 + hill(O2, HILL_OV) * hill(A, HILL_AV);
    out[5] = -G_DM * g[5] + hill(O2, HILL_OM);
}

// midpoint RK2 with the contact-weighted neighbour means and A held (model.gene_step)
extern "C" __global__ void epi_genes(const int n_cells, const int cap, const int* __restrict__ count,
                                     const float* __restrict__ contact,
                                     const double* __restrict__ A, float* __restrict__ genes,
                                     int* __restrict__ status)
{
    const int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= n_cells) return;
    const int n = count[c], EC = EPI_E * cap;
    double s0 = 0.0, s1 = 0.0, s2 = 0.0, s3 = 0.0;
    for (int k = 0; k < n; ++k) {
        const int slot = k * cap + c;
        s0 += contact[slot];
        s1 += contact[EC + slot];
        s2 += contact[2 * EC + slot];
        s3 += contact[3 * EC + slot];
    }
    const double mN = s0 > 0.0 ? s1 / s0 : 0.0, mD = s0 > 0.0 ? s2 / s0 : 0.0,
                 mB = s0 > 0.0 ? s3 / s0 : 0.0;
    const double a = A[c], dt = G_DT;
    double g[6], k1[6], h[6], k2[6];
#pragma unroll
    for (int i = 0; i < 6; ++i) g[i] = genes[i * cap + c];
    gene_rhs(g, mN, mD, mB, a, k1);
#pragma unroll
    for (int i = 0; i < 6; ++i) h[i] = g[i] + 0.5 * dt * k1[i];
    gene_rhs(h, mN, mD, mB, a, k2);
    bool ok = true;
#pragma unroll
    for (int i = 0; i < 6; ++i) {
        const double v = g[i] + dt * k2[i];
        ok = ok && isfinite(v);
        genes[i * cap + c] = (float)v;
    }
    if (!ok) { atomicOr(status, ST_GENES); atomicMin(status + 2, c); }
}

// ---- growth and division ---------------------------------------------------------------------
// model.growth_jitter: uniform offsets (2u - 1)·jitter from Philox words 0..2 of draw `event`
// of stream STREAM_GROWTH + cell, in float64
__device__ __forceinline__ void growth_jitter(const unsigned long long seed,
                                              const unsigned long long stream,
                                              const unsigned long long event, const double jitter,
                                              double off[3])
{
    const philox_u4 w = philox_draw(seed, stream, event);
    const unsigned int words[3] = {w.x, w.y, w.z};
#pragma unroll
    for (int a = 0; a < 3; ++a) {
        const double u = (double)philox_uniform_f32(words[a]);
        off[a] = __dmul_rn(__dsub_rn(__dmul_rn(2.0, u), 1.0), jitter);
    }
}

// for tests: the offsets of cells[i] (out[3][n])
extern "C" __global__ void epi_jitter(const int n, const int* __restrict__ cells,
                                      const unsigned long long seed,
                                      const unsigned long long stream0,
                                      const unsigned long long event, const double jitter,
                                      double* __restrict__ out)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    double off[3];
    growth_jitter(seed, stream0 + (unsigned long long)cells[i], event, jitter, off);
    out[i] = off[0]; out[n + i] = off[1]; out[2 * n + i] = off[2];
}

// model.grow: every live cell with D < delta_low and fewer than EPI_E elements gains one C0
// element at its centre + jitter (x, y wrapped), in slot count
extern "C" __global__ void epi_grow(const int n_cells, const int cap, float* __restrict__ pos,
                                    signed char* __restrict__ etype, int* __restrict__ count,
                                    const float* __restrict__ genes, const double delta_low,
                                    const unsigned long long seed,
                                    const unsigned long long stream0,
                                    const unsigned long long event, const double jitter)
{
    const int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= n_cells) return;
    const int n = count[c];
    if (!((double)genes[cap + c] < delta_low) || n >= EPI_E) return;
    double ctr[3], off[3];
    centre_d(pos, c, cap, n, ctr);
    growth_jitter(seed, stream0 + (unsigned long long)c, event, jitter, off);
    const int EC = EPI_E * cap, slot = n * cap + c;
#pragma unroll
    for (int a = 0; a < 3; ++a) {
        double v = __dadd_rn(ctr[a], off[a]);
        float f;
        if (a < 2 && EPI_PERIODIC) {
            f = __double2float_rn(wrap_d(v));
            if (f >= (float)G_BOX) f = 0.f;
        } else {
            f = __double2float_rn(v);
        }
        pos[a * EC + slot] = f;
    }
    etype[slot] = 0;
    count[c] = n + 1;
}

// model.divide_cells / model.split_cell, one warp per parent: parents[w] keeps the attached
// daughter, n_cells + w receives the free one
extern "C" __global__ void __launch_bounds__(128)
epi_divide(const int nparents, const int* __restrict__ parents, const int n_cells, const int cap,
           float* __restrict__ pos, signed char* __restrict__ etype, int* __restrict__ count,
           float* __restrict__ genes, const unsigned long long seed,
           const unsigned long long stream0, const unsigned long long event, const double noise,
           const int vertical, const double c1h)
{
    const int w = (blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    const int lane = threadIdx.x & 31;
    if (w >= nparents) return;                   // whole warps only (blockDim % 32 == 0)
    const int p = parents[w], q = n_cells + w;
    const int n = count[p];
    const int EC = EPI_E * cap;
    float x[EPI_R], y[EPI_R], z[EPI_R];
    int t[EPI_R];
    bool live[EPI_R];
    double ux[EPI_R], uy[EPI_R], uz[EPI_R];
#if EPI_PERIODIC
    const double x0 = pos[p], y0 = pos[EC + p];
#endif
    double sx = 0.0, sy = 0.0, sz = 0.0;
#pragma unroll
    for (int r = 0; r < EPI_R; ++r) {
        const int k = lane + 32 * r;
        live[r] = k < n;
        const int slot = k * cap + p;
        x[r] = live[r] ? pos[slot] : 0.f;
        y[r] = live[r] ? pos[EC + slot] : 0.f;
        z[r] = live[r] ? pos[2 * EC + slot] : 0.f;
        t[r] = live[r] ? etype[slot] : 0;
#if EPI_PERIODIC
        ux[r] = live[r] ? __dadd_rn(x0, min_image_d(__dsub_rn((double)x[r], x0))) : 0.0;
        uy[r] = live[r] ? __dadd_rn(y0, min_image_d(__dsub_rn((double)y[r], y0))) : 0.0;
#else
        ux[r] = x[r];
        uy[r] = y[r];
#endif
        uz[r] = z[r];
        sx += ux[r]; sy += uy[r]; sz += uz[r];
    }
    const double dn = (double)n;
    const double mx = __shfl_sync(FULL_MASK, warp_sum(sx), 0) / dn;
    const double my = __shfl_sync(FULL_MASK, warp_sum(sy), 0) / dn;
    const double mz = __shfl_sync(FULL_MASK, warp_sum(sz), 0) / dn;
    // axis: z, or the principal axis by 16 power iterations from (0.1, 0.2, 1)/|.|
    double vx = 0.0, vy = 0.0, vz = 1.0;
    if (!vertical) {
        double cxx = 0.0, cxy = 0.0, cxz = 0.0, cyy = 0.0, cyz = 0.0, czz = 0.0;
#pragma unroll
        for (int r = 0; r < EPI_R; ++r) {
            if (!live[r]) continue;
            const double a = ux[r] - mx, b = uy[r] - my, e = uz[r] - mz;
            cxx += a * a; cxy += a * b; cxz += a * e; cyy += b * b; cyz += b * e; czz += e * e;
        }
        cxx = __shfl_sync(FULL_MASK, warp_sum(cxx), 0);
        cxy = __shfl_sync(FULL_MASK, warp_sum(cxy), 0);
        cxz = __shfl_sync(FULL_MASK, warp_sum(cxz), 0);
        cyy = __shfl_sync(FULL_MASK, warp_sum(cyy), 0);
        cyz = __shfl_sync(FULL_MASK, warp_sum(cyz), 0);
        czz = __shfl_sync(FULL_MASK, warp_sum(czz), 0);
        const double n0 = sqrt(0.1 * 0.1 + 0.2 * 0.2 + 1.0);
        vx = 0.1 / n0; vy = 0.2 / n0; vz = 1.0 / n0;
        for (int it = 0; it < 16; ++it) {
            const double wx = cxx * vx + cxy * vy + cxz * vz;
            const double wy = cxy * vx + cyy * vy + cyz * vz;
            const double wz = cxz * vx + cyz * vy + czz * vz;
            const double nrm = sqrt(wx * wx + wy * wy + wz * wz);
            if (nrm < 1e-12) break;
            vx = wx / nrm; vy = wy / nrm; vz = wz / nrm;
        }
    }
    double proj[EPI_R];
#pragma unroll
    for (int r = 0; r < EPI_R; ++r)
        proj[r] = live[r] ? vx * (ux[r] - mx) + vy * (uy[r] - my) + vz * (uz[r] - mz) : 0.0;
    // rank by (projection, slot); the lower n/2 form daughter a
    int rank[EPI_R];
#pragma unroll
    for (int r = 0; r < EPI_R; ++r) rank[r] = 0;
#pragma unroll
    for (int r2 = 0; r2 < EPI_R; ++r2) {
        for (int src = 0; src < 32; ++src) {
            const double pj = __shfl_sync(FULL_MASK, proj[r2], src);
            const int j = src + 32 * r2;
            if (j >= n) continue;
#pragma unroll
            for (int r = 0; r < EPI_R; ++r) {
                const int k = lane + 32 * r;
                if (pj < proj[r] || (pj == proj[r] && j < k)) ++rank[r];
            }
        }
    }
    const int half = n / 2;
    int ca = 0, cb = 0;
    double za = 0.0, zb = 0.0;
#pragma unroll
    for (int r = 0; r < EPI_R; ++r) {
        const bool ina = live[r] && rank[r] < half, inb = live[r] && rank[r] >= half;
        ca += __popc(__ballot_sync(FULL_MASK, ina && t[r] == 1));
        cb += __popc(__ballot_sync(FULL_MASK, inb && t[r] == 1));
        za += ina ? uz[r] : 0.0;
        zb += inb ? uz[r] : 0.0;
    }
    za = __shfl_sync(FULL_MASK, warp_sum(za), 0) / (double)half;
    zb = __shfl_sync(FULL_MASK, warp_sum(zb), 0) / (double)(n - half);
    const bool swap = ca < cb || (ca == cb && za > zb);
    // pack: attached daughter -> parent's column, free daughter -> column q, slot order kept
    const unsigned lt = (1u << lane) - 1u;
    int baseA = 0, baseF = 0;
#pragma unroll
    for (int r = 0; r < EPI_R; ++r) {
        const bool att = live[r] && ((rank[r] < half) != swap);
        const bool fre = live[r] && !att;
        const unsigned bA = __ballot_sync(FULL_MASK, att), bF = __ballot_sync(FULL_MASK, fre);
        if (att) {
            const int d = (baseA + __popc(bA & lt)) * cap + p;
            pos[d] = x[r]; pos[EC + d] = y[r]; pos[2 * EC + d] = z[r];
            etype[d] = (double)z[r] < c1h ? 1 : 0;
        }
        if (fre) {
            const int d = (baseF + __popc(bF & lt)) * cap + q;
            pos[d] = x[r]; pos[EC + d] = y[r]; pos[2 * EC + d] = z[r];
            etype[d] = 0;
        }
        baseA += __popc(bA);
        baseF += __popc(bF);
    }
    // clear the slots past each daughter's count
    for (int k = lane; k < EPI_E; k += 32) {
        if (k >= baseA) {
            const int d = k * cap + p;
            pos[d] = 0.f; pos[EC + d] = 0.f; pos[2 * EC + d] = 0.f; etype[d] = 0;
        }
        if (k >= baseF) {
            const int d = k * cap + q;
            pos[d] = 0.f; pos[EC + d] = 0.f; pos[2 * EC + d] = 0.f; etype[d] = 0;
        }
    }
    if (lane == 0) { count[p] = baseA; count[q] = baseF; }
    // gene shares: model.division_factors row 0 to the attached daughter, row 1 to the free one
    if (lane < 6) {
        const philox_u4 wd = philox_draw(seed, stream0 + (unsigned long long)p, event);
        const double u0 = (double)philox_uniform_f32(wd.x), u1 = (double)philox_uniform_f32(wd.y);
        const double f0 = __dmul_rn(0.5, __dadd_rn(1.0, __dmul_rn(noise, __dsub_rn(__dmul_rn(2.0, u0), 1.0))));
        const double f1 = __dmul_rn(0.5, __dadd_rn(1.0, __dmul_rn(noise, __dsub_rn(__dmul_rn(2.0, u1), 1.0))));
        const double g = genes[lane * cap + p];
        genes[lane * cap + p] = __double2float_rn(__dmul_rn(f0, g));
        genes[lane * cap + q] = __double2float_rn(__dmul_rn(f1, g));
    }
}

// ---- capacity doubling: copy rows of width old_cap into rows of width new_cap ---------------
extern "C" __global__ void epi_copy_rows32(const int rows, const int old_cap, const int new_cap,
                                           const unsigned int* __restrict__ src,
                                           unsigned int* __restrict__ dst)
{
    const int c = blockIdx.x * blockDim.x + threadIdx.x;
    const int r = blockIdx.y;
    if (c < old_cap && r < rows) dst[(size_t)r * new_cap + c] = src[(size_t)r * old_cap + c];
}

extern "C" __global__ void epi_copy_rows8(const int rows, const int old_cap, const int new_cap,
                                          const signed char* __restrict__ src,
                                          signed char* __restrict__ dst)
{
    const int c = blockIdx.x * blockDim.x + threadIdx.x;
    const int r = blockIdx.y;
    if (c < old_cap && r < rows) dst[(size_t)r * new_cap + c] = src[(size_t)r * old_cap + c];
}
