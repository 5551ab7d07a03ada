// Cultured network: LIF neurons, Tsodyks-Markram synapses, activity-dependent growth.
// The model and step semantics are those of app/sims/network/model.py (the CPU reference).
//
// net_step advances every neuron NET_CHUNK (= the minimum synaptic delay) steps or fewer per
// launch: no spike emitted inside a chunk can reach any neuron before the chunk ends, so
// neurons need no exchange inside it. Spike propagation is a pull over an inverse map: the
// NET_LANES threads of a target walk its incoming synapses (ELL layout, slot-major, sorted by
// source) and read the sources' 64-step spike histories (hist_in, written by the previous
// launch; the new histories go to hist_out), then sum their deliveries with warp shuffles.
// Synapse state is owned by its target's threads, so the hot path has no atomics; only
// recording a spike appends to a buffer with one atomicAdd.
//
// Growth (once per epoch, on the GPU): net_grow (rate -> F -> G -> radius), net_count
// (overlapping sources per target), net_build (new ELL rows, weights from the overlap area,
// Tsodyks-Markram state carried over from the old rows by a merge).
#include "philox.cuh"

#ifndef NET_CHUNK
#define NET_CHUNK 9
#endif
#ifndef NET_LANES
#define NET_LANES 8           // threads per target neuron: 1, 2, 4, 8, 16 or 32
#endif
#define NET_ZPL ((NET_CHUNK + NET_LANES - 1) / NET_LANES)
#define NET_NEVER (-(1 << 30))
#define NET_PI 3.14159265358979323846

__constant__ float c_U[4];        // per type EE, EI, IE, II (source -> target)
__constant__ float c_wscale[4];   // steering: weight factor per type (0 blocks the type)
__constant__ float c_invD[4];     // 1 / tau_rec
__constant__ float c_invF[4];     // 1 / tau_facil
__constant__ float c_decay[4];    // exp(-dt / tau)
__constant__ int c_delay[4];      // steps
__constant__ float c_lif[4];      // c1, c2, i0, dt
__constant__ double c_growth[6];  // epsilon, beta, rho, target_rate, max_radius, weight_scale

// step_offset: the chunk's first step counted from *step_base (the device-side step counter a
// captured graph of chunks advances with net_base; the host sets it before each run of chunks).
extern "C" __global__ void net_step(
    const int n, const int step_offset, const int nsteps, const unsigned long long seed,
    float* __restrict__ V, int* __restrict__ refrac, float* __restrict__ gE, float* __restrict__ gI,
    const float* __restrict__ vth, const float* __restrict__ vreset, const float* __restrict__ inoise,
    const int* __restrict__ tref, const unsigned char* __restrict__ inh,
    const unsigned long long* __restrict__ hist_in, unsigned long long* __restrict__ hist_out,
    const int* __restrict__ rowlen, const unsigned int* __restrict__ pre, const float* __restrict__ W,
    float* __restrict__ su, float* __restrict__ sr, int* __restrict__ slast,
    unsigned int* __restrict__ counts, unsigned long long* __restrict__ spikes,
    unsigned int* __restrict__ nspikes, const unsigned int capacity, const int* __restrict__ step_base)
{
    const int step0 = *step_base + step_offset;
    // NET_LANES threads per target neuron: they split its incoming synapses and its noise
    // draws; lane 0 then integrates the neuron. No early return before the warp collectives.
    const int g = blockIdx.x * blockDim.x + threadIdx.x;
    const int i = g / NET_LANES;
    const int lane = g % NET_LANES;
    const bool valid = i < n;
    const int me = valid ? inh[i] : 0;
    float aE[NET_CHUNK], aI[NET_CHUNK];
#pragma unroll
    for (int t = 0; t < NET_CHUNK; ++t) { aE[t] = 0.f; aI[t] = 0.f; }
    const float dt = c_lif[3];
    const unsigned int window = (1u << nsteps) - 1u;

    // ---- deliveries of this chunk: sources that spiked delay steps before each step
    const int len = valid ? rowlen[i] : 0;
    int arrived = 0;
    for (int k = lane; k < len; k += NET_LANES) {
        const size_t s = (size_t)k * n + i;
        const unsigned int p = pre[s];
        const int j = (int)(p & 0x7fffffffu);
        const int pin = (int)(p >> 31);
        const int typ = (pin << 1) | me;
        const int D = c_delay[typ];
        const unsigned int bits = (unsigned int)(hist_in[j] >> (D - nsteps)) & window;
        if (bits) {
            arrived = 1;
            const float w = W[s] * c_wscale[typ], U = c_U[typ], invD = c_invD[typ], invF = c_invF[typ];
            float u = su[s], r = sr[s];
            int last = slast[s];
#pragma unroll
            for (int t = 0; t < NET_CHUNK; ++t) {
                if (t < nsteps && ((bits >> (nsteps - 1 - t)) & 1u)) {
                    const int m = step0 + t;
                    const float isi = (float)(m - last) * dt;
                    r = 1.f + (r * (1.f - u) - 1.f) * __expf(-isi * invD);
                    u = U + u * (1.f - U) * __expf(-isi * invF);
                    const float jump = w * u * r;
                    if (pin) aI[t] += jump; else aE[t] += jump;
                    last = m;
                }
            }
            su[s] = u; sr[s] = r; slast[s] = last;
        }
    }
    if (__any_sync(0xffffffffu, arrived)) {        // sum the lanes of each target (lane 0 gets it)
#pragma unroll
        for (int t = 0; t < NET_CHUNK; ++t) {
#pragma unroll
            for (int off = NET_LANES / 2; off > 0; off >>= 1) {
                aE[t] += __shfl_down_sync(0xffffffffu, aE[t], off, NET_LANES);
                aI[t] += __shfl_down_sync(0xffffffffu, aI[t], off, NET_LANES);
            }
        }
    }

    // ---- noise: lane l draws the normals of steps l, l + NET_LANES, ...
    float zl[NET_ZPL];
#pragma unroll
    for (int q = 0; q < NET_ZPL; ++q) {
        const int t = lane + q * NET_LANES;
        zl[q] = 0.f;
        if (valid && t < nsteps) {
            const int m = step0 + t;
            const philox_u4 wd = philox_draw(seed, (uint64_t)i, (uint64_t)(m >> 1));
            const uint32_t a = (m & 1) ? wd.z : wd.x, b = (m & 1) ? wd.w : wd.y;
            zl[q] = sqrtf(-2.f * __logf(philox_uniform_f32(a)))
                  * __cosf(6.2831853071795865f * philox_uniform_f32(b));
        }
    }
    float z[NET_CHUNK];
#pragma unroll
    for (int t = 0; t < NET_CHUNK; ++t)
        z[t] = __shfl_sync(0xffffffffu, zl[t / NET_LANES], t % NET_LANES, NET_LANES);
    if (!valid || lane != 0) return;

    // ---- the neuron, nsteps steps
    const float c1 = c_lif[0], c2 = c_lif[1], i0 = c_lif[2];
    const float dE = c_decay[me], dI = c_decay[2 + me];
    const float th = vth[i], vr = vreset[i], sig = inoise[i];
    const int tr = tref[i];
    float v = V[i], ge = gE[i], gi = gI[i];
    int ref = refrac[i];
    unsigned int newbits = 0u, cnt = 0u;
#pragma unroll
    for (int t = 0; t < NET_CHUNK; ++t) {
        if (t < nsteps) {
            const int m = step0 + t;
            if (ref > 0) {
                --ref;
            } else if (v >= th) {
                newbits |= 1u << (nsteps - 1 - t);
                ++cnt;
                ref = tr;
                v = vr;
                const unsigned int slot = atomicAdd(nspikes, 1u);
                if (slot < capacity) spikes[slot] = ((unsigned long long)(unsigned int)m << 32) | (unsigned int)i;
            } else {
                v = c1 * v + c2 * (ge + gi + i0 + sig * z[t]);
            }
            ge = ge * dE + aE[t];
            gi = gi * dI + aI[t];
        }
    }
    V[i] = v; gE[i] = ge; gI[i] = gi; refrac[i] = ref;
    hist_out[i] = (hist_in[i] << nsteps) | newbits;
    if (cnt) counts[i] += cnt;
}

// ---------------------------------------------------------------------------------------------
// growth

__device__ __forceinline__ double net_overlap(const double ri, const double rj, const double d)
{
    if (!(d < ri + rj)) return 0.0;
    const double small = fmin(ri, rj), big = fmax(ri, rj);
    if (d + small <= big) return NET_PI * small * small;
    const double ca = fmin(fmax((rj * rj + d * d - ri * ri) / (2.0 * rj * d), -1.0), 1.0);
    const double cb = fmin(fmax((ri * ri + d * d - rj * rj) / (2.0 * ri * d), -1.0), 1.0);
    const double al = acos(ca), be = acos(cb);
    return 0.5 * (rj * rj * (2.0 * al - sin(2.0 * al)) + ri * ri * (2.0 * be - sin(2.0 * be)));
}

extern "C" __global__ void net_grow(const int n, const double seconds, unsigned int* __restrict__ counts,
                                    double* __restrict__ radius, float* __restrict__ rate,
                                    unsigned long long* __restrict__ rmax_bits)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const double eps = c_growth[0], beta = c_growth[1], rho = c_growth[2];
    const double target = c_growth[3], rmax = c_growth[4];
    const double rt = (double)counts[i] / seconds;
    counts[i] = 0u;
    rate[i] = (float)rt;
    const double f = rt / (target / eps);
    const double g = 1.0 - 2.0 / (1.0 + exp((eps - f) / beta));
    const double r = fmin(fmax(radius[i] + seconds * rho * g, 0.0), rmax);
    radius[i] = r;
    atomicMax(rmax_bits, (unsigned long long)__double_as_longlong(r));   // r >= 0: bits order as values
}

extern "C" __global__ void net_count(const int n, const int width, const int height,
                                     const double* __restrict__ radius,
                                     const unsigned long long* __restrict__ rmax_bits,
                                     int* __restrict__ rowlen, unsigned int* __restrict__ totals)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const int x = i % width, y = i / width;
    const double ri = radius[i], rm = __longlong_as_double((long long)*rmax_bits);
    const int h = (int)ceil(ri + rm);
    int cnt = 0;
    for (int dy = -h; dy <= h; ++dy) {
        const int yy = y + dy;
        if (yy < 0 || yy >= height) continue;
        for (int dx = -h; dx <= h; ++dx) {
            const int xx = x + dx;
            if (xx < 0 || xx >= width || (dx == 0 && dy == 0)) continue;
            const double d = sqrt((double)(dx * dx + dy * dy));
            if (net_overlap(radius[yy * width + xx], ri, d) > 0.0) ++cnt;
        }
    }
    rowlen[i] = cnt;
    atomicAdd(&totals[0], (unsigned int)cnt);
    atomicMax(&totals[1], (unsigned int)cnt);
}

extern "C" __global__ void net_build(const int n, const int width, const int height,
                                     const double* __restrict__ radius,
                                     const unsigned long long* __restrict__ rmax_bits,
                                     const unsigned char* __restrict__ inh,
                                     const int* __restrict__ old_len, const unsigned int* __restrict__ old_pre,
                                     const float* __restrict__ old_u, const float* __restrict__ old_r,
                                     const int* __restrict__ old_last,
                                     int* __restrict__ rowlen, unsigned int* __restrict__ pre,
                                     float* __restrict__ W, float* __restrict__ su, float* __restrict__ sr,
                                     int* __restrict__ slast)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const int x = i % width, y = i / width;
    const int me = inh[i];
    const double ri = radius[i], rm = __longlong_as_double((long long)*rmax_bits);
    const double scale = c_growth[5];
    const int h = (int)ceil(ri + rm);
    const int olen = old_len[i];
    int k = 0, ko = 0;
    for (int dy = -h; dy <= h; ++dy) {
        const int yy = y + dy;
        if (yy < 0 || yy >= height) continue;
        for (int dx = -h; dx <= h; ++dx) {
            const int xx = x + dx;
            if (xx < 0 || xx >= width || (dx == 0 && dy == 0)) continue;
            const int j = yy * width + xx;
            const double area = net_overlap(radius[j], ri, sqrt((double)(dx * dx + dy * dy)));
            if (!(area > 0.0)) continue;
            const int pin = inh[j];
            const size_t s = (size_t)k * n + i;
            pre[s] = (unsigned int)j | ((unsigned int)pin << 31);
            W[s] = (float)(area * scale * (pin ? -1.0 : 1.0));
            while (ko < olen && (int)(old_pre[(size_t)ko * n + i] & 0x7fffffffu) < j) ++ko;
            if (ko < olen && (int)(old_pre[(size_t)ko * n + i] & 0x7fffffffu) == j) {
                const size_t so = (size_t)ko * n + i;
                su[s] = old_u[so]; sr[s] = old_r[so]; slast[s] = old_last[so];
            } else {
                su[s] = c_U[(pin << 1) | me]; sr[s] = 1.f; slast[s] = NET_NEVER;
            }
            ++k;
        }
    }
    rowlen[i] = k;
}

// The device-side step counter net_step counts from: set to value, or (add) advanced by it.
extern "C" __global__ void net_base(int* __restrict__ step_base, const int value, const int add)
{
    if (threadIdx.x == 0 && blockIdx.x == 0) *step_base = add ? *step_base + value : value;
}

// An empty kernel with net_step's launch shape: the benchmark's launch-overhead floor.
extern "C" __global__ void net_noop(const int n, const int step0, const int nsteps, unsigned int* sink)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i == n) sink[0] = (unsigned int)(step0 + nsteps);
}
