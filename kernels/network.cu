// Cultured network: LIF neurons, Tsodyks-Markram synapses, activity-dependent growth.
// The model and step semantics are those of app/sims/network/model.py (the CPU reference).
//
// Neurons advance by chunks of NET_CHUNK (= the minimum synaptic delay) steps or fewer: no
// spike emitted inside a chunk can reach any neuron before the chunk ends, so neurons need no
// exchange inside it. Spike propagation is a pull over an inverse map: the NET_LANES threads of
// a target walk its incoming synapses (ELL layout, slot-major, sorted by source) and read the
// sources' 64-step spike histories, then sum their deliveries with warp shuffles. Synapse state
// is owned by its target's threads, so the hot path has no atomics; only recording a spike
// appends to a buffer with one atomicAdd. net_step runs one chunk per launch (histories in
// hist_in, the new ones to hist_out); net_run many chunks per launch, each block waiting only
// for the neurons around its tile (below). Both use the same pieces, in the same order.
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
#ifndef NET_RUN_NARROW
#define NET_RUN_NARROW 640     // net_run_narrow's largest block (65536 / 640: up to 96 registers a thread)
#endif
#define NET_PAIRS (NET_CHUNK / 2 + 1)   // Philox draws (step pairs) a chunk touches, at most
#define NET_PPL ((NET_PAIRS + NET_LANES - 1) / NET_LANES)
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

// ---- the pieces of a chunk, shared by net_step (one launch per chunk) and net_run (many chunks
// per launch)

// Deliveries of one chunk to a target: lane `lane` of its NET_LANES threads walks slots lane,
// lane + NET_LANES, ... of its ELL row, slot k at k * stride + base of src, W, su, sr and slast:
// src holds the source's index into `hist` (bit 31: the source is inhibitory), hist[] the
// sources' spike histories before the chunk, W, su, sr, slast the weight and Tsodyks-Markram
// state.
__device__ __forceinline__ int net_deliver(
    const int lane, const int me, const int len, const int step0, const int nsteps,
    const unsigned int* src, const unsigned long long* hist, const float* W, float* su, float* sr,
    int* slast, const int stride, const int base, float* aE, float* aI)
{
    const float dt = c_lif[3];
    const unsigned int window = (1u << nsteps) - 1u;
    int arrived = 0;
    for (int k = lane; k < len; k += NET_LANES) {
        const size_t s = (size_t)k * stride + base;
        const unsigned int p = src[s];
        const int pin = (int)(p >> 31);
        const int typ = (pin << 1) | me;
        const int D = c_delay[typ];
        const unsigned int bits = (unsigned int)(hist[p & 0x7fffffffu] >> (D - nsteps)) & window;
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
    return arrived;
}

__device__ __forceinline__ float net_normal(const uint32_t a, const uint32_t b)
{
    return sqrtf(-2.f * __logf(philox_uniform_f32(a))) * __cosf(6.2831853071795865f * philox_uniform_f32(b));
}

// Sum the lanes of each target (lane 0 gets it). All lanes of the warp call it.
__device__ __forceinline__ void net_gather(const int arrived, float* aE, float* aI)
{
    if (__any_sync(0xffffffffu, arrived)) {
#pragma unroll
        for (int t = 0; t < NET_CHUNK; ++t) {
#pragma unroll
            for (int off = NET_LANES / 2; off > 0; off >>= 1) {
                aE[t] += __shfl_down_sync(0xffffffffu, aE[t], off, NET_LANES);
                aI[t] += __shfl_down_sync(0xffffffffu, aI[t], off, NET_LANES);
            }
        }
    }
}

// The chunk's normals of neuron i: step m's comes from Philox draw m >> 1 (words x, y for an
// even m, z, w for an odd one), so lane l makes both normals of the chunk's pairs l,
// l + NET_LANES, ...; every lane gets all of them in z. All lanes of the warp call it.
__device__ __forceinline__ void net_noise(const bool valid, const int i, const int lane, const int step0,
                                          const int nsteps, const unsigned long long seed, float* z)
{
    const int p0 = step0 >> 1;
    const int pairs = ((step0 + nsteps - 1) >> 1) - p0 + 1;
    float ze[NET_PPL], zo[NET_PPL];
#pragma unroll
    for (int q = 0; q < NET_PPL; ++q) {
        const int k = lane + q * NET_LANES;
        ze[q] = 0.f;
        zo[q] = 0.f;
        if (valid && k < pairs) {
            const philox_u4 wd = philox_draw(seed, (uint64_t)i, (uint64_t)(p0 + k));
            ze[q] = net_normal(wd.x, wd.y);
            zo[q] = net_normal(wd.z, wd.w);
        }
    }
#pragma unroll
    for (int t = 0; t < NET_CHUNK; ++t) {
        const int m = step0 + t, k = (m >> 1) - p0;
        float mine = 0.f;                   // this lane's value for pair slot k / NET_LANES
#pragma unroll
        for (int q = 0; q < NET_PPL; ++q)
            if (NET_PPL == 1 || q == k / NET_LANES) mine = (m & 1) ? zo[q] : ze[q];
        z[t] = __shfl_sync(0xffffffffu, mine, k % NET_LANES, NET_LANES);
    }
}

// A neuron's state and constants, in registers while it steps.
struct NetNeuron {
    float v, ge, gi, th, vr, sig, dE, dI;
    int ref, tr;
    unsigned int spikes;                // spikes since the load
};

__device__ __forceinline__ NetNeuron net_load(
    const int i, const int me, const float* __restrict__ V, const int* __restrict__ refrac,
    const float* __restrict__ gE, const float* __restrict__ gI, const float* __restrict__ vth,
    const float* __restrict__ vreset, const float* __restrict__ inoise, const int* __restrict__ tref)
{
    NetNeuron s;
    s.v = V[i]; s.ge = gE[i]; s.gi = gI[i]; s.ref = refrac[i];
    s.th = vth[i]; s.vr = vreset[i]; s.sig = inoise[i]; s.tr = tref[i];
    s.dE = c_decay[me]; s.dI = c_decay[2 + me];
    s.spikes = 0u;
    return s;
}

__device__ __forceinline__ void net_store(const int i, const NetNeuron& s, float* __restrict__ V,
    int* __restrict__ refrac, float* __restrict__ gE, float* __restrict__ gI, unsigned int* __restrict__ counts)
{
    V[i] = s.v; gE[i] = s.ge; gI[i] = s.gi; refrac[i] = s.ref;
    if (s.spikes) counts[i] += s.spikes;
}

// Neuron i over nsteps steps (lane 0 only): returns the new spike bits (bit nsteps-1-t: a spike
// at step t). A spike is recorded at out[atomicAdd(count, 1)] while the slot is below capacity.
__device__ __forceinline__ unsigned int net_integrate(
    NetNeuron& s, const int i, const int step0, const int nsteps, const float* z, const float* aE,
    const float* aI, unsigned int* count, unsigned long long* __restrict__ out, const unsigned int capacity)
{
    const float c1 = c_lif[0], c2 = c_lif[1], i0 = c_lif[2];
    unsigned int newbits = 0u;
#pragma unroll
    for (int t = 0; t < NET_CHUNK; ++t) {
        if (t < nsteps) {
            const int m = step0 + t;
            if (s.ref > 0) {
                --s.ref;
            } else if (s.v >= s.th) {
                newbits |= 1u << (nsteps - 1 - t);
                ++s.spikes;
                s.ref = s.tr;
                s.v = s.vr;
                const unsigned int slot = atomicAdd(count, 1u);
                if (slot < capacity) out[slot] = ((unsigned long long)(unsigned int)m << 32) | (unsigned int)i;
            } else {
                s.v = c1 * s.v + c2 * (s.ge + s.gi + i0 + s.sig * z[t]);
            }
            s.ge = s.ge * s.dE + aE[t];
            s.gi = s.gi * s.dI + aI[t];
        }
    }
    return newbits;
}

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
    float aE[NET_CHUNK], aI[NET_CHUNK], z[NET_CHUNK];
#pragma unroll
    for (int t = 0; t < NET_CHUNK; ++t) { aE[t] = 0.f; aI[t] = 0.f; }
    const int arrived = net_deliver(lane, me, valid ? rowlen[i] : 0, step0, nsteps, pre, hist_in,
                                    W, su, sr, slast, n, i, aE, aI);
    net_gather(arrived, aE, aI);
    net_noise(valid, i, lane, step0, nsteps, seed, z);
    if (!valid || lane != 0) return;
    NetNeuron s = net_load(i, me, V, refrac, gE, gI, vth, vreset, inoise, tref);
    const unsigned int newbits = net_integrate(s, i, step0, nsteps, z, aE, aI, nspikes, spikes, capacity);
    net_store(i, s, V, refrac, gE, gI, counts);
    hist_out[i] = (hist_in[i] << nsteps) | newbits;
}

// ---- many chunks per launch (cultures whose neurons fit one block per multiprocessor)
//
// Block b owns a tile of tile_w x tile_h neurons (NET_LANES threads each, held in one launch
// of at most one block per multiprocessor, so every block is resident at once). Instead of a
// launch boundary between chunks, each neuron publishes its chunk's spike bits in a tagged
// word, pub[chunk % 2][i] = chunk << 32 | bits, and a block waits only for the words
// of the neurons within `halo` rows and columns of its tile (every source of its neurons: a
// synapse spans less than twice the largest radius), which it keeps as 64-step histories in
// shared memory. Two slots suffice: a block can publish chunk c + 1 only after reading chunk
// c of every neighbour, which each published only after reading the block's chunk c - 1, so
// the slot it overwrites has been read. src holds each slot's source as an index into the
// block's halo (net_local). The block's synapse rows (source, weight, u, r, last delivery:
// `slots` per neuron, slot k of tile neuron g at k * stride + g) stay in shared memory for the launch;
// u, r and last are written back at its end. Spikes go to the block's own segment of `spikes`
// (block_capacity entries), counted in block_spikes[b]; net_compact gathers them. Blocks of at
// most NET_RUN_NARROW threads launch net_run_narrow, the same body with more registers a thread.
// status[0] becomes 1 if a wait outlasts NET_SPIN_LIMIT polls (a bug, or blocks of the launch
// kept from running at once by another launch of net_run: the engine allows one at a time).
#ifndef NET_SPIN_LIMIT
#define NET_SPIN_LIMIT (1u << 26)
#endif

__device__ __forceinline__ unsigned long long net_load_word(const unsigned long long* p)
{
    unsigned long long v;
    asm volatile("ld.relaxed.gpu.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
    return v;
}

__device__ __forceinline__ void net_store_word(unsigned long long* p, const unsigned long long v)
{
    asm volatile("st.relaxed.gpu.global.u64 [%0], %1;" :: "l"(p), "l"(v) : "memory");
}

#define NET_RUN_PARAMS \
    const int n, const int width, const int height, const int tiles_x, const int tile_w, \
    const int tile_h, const int halo, const int slots, const int stride, const int chunk0, const int nchunks, const int step0, \
    const int last_steps, const unsigned long long seed, \
    float* __restrict__ V, int* __restrict__ refrac, float* __restrict__ gE, float* __restrict__ gI, \
    const float* __restrict__ vth, const float* __restrict__ vreset, const float* __restrict__ inoise, \
    const int* __restrict__ tref, const unsigned char* __restrict__ inh, \
    const unsigned long long* __restrict__ hist_in, unsigned long long* __restrict__ hist_out, \
    unsigned long long* __restrict__ pub, const int* __restrict__ rowlen, const unsigned int* __restrict__ src, \
    const float* __restrict__ W, float* __restrict__ su, float* __restrict__ sr, int* __restrict__ slast, \
    unsigned int* __restrict__ counts, unsigned long long* __restrict__ spikes, \
    unsigned int* __restrict__ block_spikes, const unsigned int block_capacity, \
    unsigned int* __restrict__ status
#define NET_RUN_ARGS n, width, height, tiles_x, tile_w, tile_h, halo, slots, stride, chunk0, \
    nchunks, step0, last_steps, seed, V, refrac, gE, gI, vth, vreset, inoise, tref, inh, hist_in, \
    hist_out, pub, rowlen, src, W, su, sr, slast, counts, spikes, block_spikes, block_capacity, \
    status

__device__ __forceinline__ void net_run_body(NET_RUN_PARAMS)
{
    // shared: the halo's histories, its culture indices, then the block's synapse rows
    extern __shared__ unsigned long long shist[];
    const int tn = tile_w * tile_h;
    int* const shalo = (int*)(shist + (tile_w + 2 * halo) * (tile_h + 2 * halo));
    float* const sW = (float*)(shalo + (tile_w + 2 * halo) * (tile_h + 2 * halo));
    float* const sU = sW + slots * stride;
    float* const sR = sU + slots * stride;
    int* const sLast = (int*)(sR + slots * stride);
    unsigned int* const sSrc = (unsigned int*)(sLast + slots * stride);
    __shared__ unsigned int s_count, s_stop;
    const int hw = tile_w + 2 * halo, hh = tile_h + 2 * halo;
    const int x0 = (blockIdx.x % tiles_x) * tile_w, y0 = (blockIdx.x / tiles_x) * tile_h;
    const int g = threadIdx.x / NET_LANES, lane = threadIdx.x % NET_LANES;
    const int x = x0 + g % tile_w, y = y0 + g / tile_w;
    const bool valid = g < tn && x < width && y < height;
    const int i = valid ? y * width + x : 0;
    const int me = valid ? inh[i] : 0;
    const int len = valid ? rowlen[i] : 0;
    const int own = (g / tile_w + halo) * hw + g % tile_w + halo;
    unsigned long long* out = spikes + (size_t)blockIdx.x * block_capacity;
    if (threadIdx.x == 0) { s_count = 0u; s_stop = 0u; }
    NetNeuron s;                        // lane 0's neuron, in registers for the whole launch
    if (valid && lane == 0) s = net_load(i, me, V, refrac, gE, gI, vth, vreset, inoise, tref);
    for (int h = threadIdx.x; h < hw * hh; h += blockDim.x) {
        const int xx = x0 - halo + h % hw, yy = y0 - halo + h / hw;
        const bool inside = xx >= 0 && xx < width && yy >= 0 && yy < height;
        shalo[h] = inside ? yy * width + xx : -1;
        shist[h] = inside ? hist_in[yy * width + xx] : 0ull;
    }
    for (int k = lane; k < len; k += NET_LANES) {
        const size_t s = (size_t)k * n + i;
        const int l = k * stride + g;
        sSrc[l] = src[s]; sW[l] = W[s]; sU[l] = su[s]; sR[l] = sr[s]; sLast[l] = slast[s];
    }
    __syncthreads();
    for (int q = 0; q < nchunks; ++q) {
        const unsigned int chunk = (unsigned int)chunk0 + (unsigned int)q;
        const int m0 = step0 + q * NET_CHUNK;
        const int ns = q == nchunks - 1 ? last_steps : NET_CHUNK;
        // The first word this thread waits for is asked for before the noise is drawn, which
        // needs no neighbour: its latency and the neighbours' lag overlap the draws.
        const unsigned long long* slot = pub + (size_t)((chunk - 1u) & 1u) * n;
        const int first = (q > 0 && threadIdx.x < hw * hh) ? shalo[threadIdx.x] : -1;
        unsigned long long w = first >= 0 ? net_load_word(slot + first) : 0ull;
        float aE[NET_CHUNK], aI[NET_CHUNK], z[NET_CHUNK];
        net_noise(valid, i, lane, m0, ns, seed, z);
        if (q > 0) {                    // the neighbours' bits of the chunk before (always full)
            const unsigned int tag = chunk - 1u;
            for (int h = threadIdx.x; h < hw * hh; h += blockDim.x) {
                const int j = shalo[h];
                if (j < 0) continue;
                const unsigned long long* p = slot + j;
                if (h != threadIdx.x) w = net_load_word(p);
                unsigned int polls = 0u;
                while ((unsigned int)(w >> 32) != tag) {
                    if ((++polls & 1023u) == 0u && (polls > NET_SPIN_LIMIT || *(volatile unsigned int*)status)) {
                        atomicExch(status, 1u);
                        s_stop = 1u;
                        break;
                    }
                    w = net_load_word(p);
                }
                shist[h] = (shist[h] << NET_CHUNK) | (w & 0xffffffffull);
            }
            __syncthreads();
            if (s_stop) return;         // read after the barrier: every thread of the block agrees
        }
#pragma unroll
        for (int t = 0; t < NET_CHUNK; ++t) { aE[t] = 0.f; aI[t] = 0.f; }
        const int arrived = net_deliver(lane, me, len, m0, ns, sSrc, shist, sW, sU, sR, sLast, stride, g,
                                         aE, aI);
        net_gather(arrived, aE, aI);
        if (valid && lane == 0) {
            const unsigned int newbits = net_integrate(s, i, m0, ns, z, aE, aI, &s_count, out, block_capacity);
            if (q == nchunks - 1) {
                hist_out[i] = (shist[own] << ns) | newbits;
                net_store(i, s, V, refrac, gE, gI, counts);
            }
            else net_store_word(pub + (size_t)(chunk & 1u) * n + i, ((unsigned long long)chunk << 32) | newbits);
        }
        __syncthreads();                // shist is read by every lane before the next chunk writes it
    }
    for (int k = lane; k < len; k += NET_LANES) {
        const size_t s = (size_t)k * n + i;
        const int l = k * stride + g;
        su[s] = sU[l]; sr[s] = sR[l]; slast[s] = sLast[l];
    }
    if (threadIdx.x == 0) block_spikes[blockIdx.x] = s_count;
}

// One body, two register budgets: blocks of up to 1024 threads get 64 registers a thread, blocks
// of up to NET_RUN_NARROW (the tiles most cultures get) up to 96, enough for the body unspilled.
extern "C" __global__ void __launch_bounds__(1024) net_run(NET_RUN_PARAMS)
{
    net_run_body(NET_RUN_ARGS);
}

extern "C" __global__ void __launch_bounds__(NET_RUN_NARROW) net_run_narrow(NET_RUN_PARAMS)
{
    net_run_body(NET_RUN_ARGS);
}

// Each slot's source as an index into its target's block halo (net_run's src); status[0] = 2 if
// a source lies outside the halo (the host's halo was too small: a bug).
extern "C" __global__ void net_local(const int n, const int width, const int tile_w, const int tile_h,
                                     const int halo, const int slots, const int* __restrict__ rowlen,
                                     const unsigned int* __restrict__ pre, unsigned int* __restrict__ src,
                                     unsigned int* __restrict__ status)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const int x = i % width, y = i / width;
    const int hx0 = x / tile_w * tile_w - halo, hy0 = y / tile_h * tile_h - halo;
    const int hw = tile_w + 2 * halo, hh = tile_h + 2 * halo;
    const int len = rowlen[i];
    for (int k = 0; k < slots; ++k) {
        const size_t s = (size_t)k * n + i;
        if (k >= len) { src[s] = 0u; continue; }
        const unsigned int p = pre[s];
        const int j = (int)(p & 0x7fffffffu);
        const int hx = j % width - hx0, hy = j / width - hy0;
        if (hx < 0 || hx >= hw || hy < 0 || hy >= hh) { atomicExch(status, 2u); src[s] = 0u; continue; }
        src[s] = (unsigned int)(hy * hw + hx) | (p & 0x80000000u);
    }
}

// The blocks' spike segments of net_run gathered into one array (block order), and the total.
extern "C" __global__ void net_compact(const int blocks, const unsigned int block_capacity,
                                       const unsigned int* __restrict__ block_spikes,
                                       const unsigned long long* __restrict__ segments,
                                       unsigned long long* __restrict__ spikes, unsigned int* __restrict__ nspikes)
{
    unsigned int offset = 0u;
    for (int b = 0; b < (int)blockIdx.x; ++b) offset += min(block_spikes[b], block_capacity);
    const unsigned int count = min(block_spikes[blockIdx.x], block_capacity);
    for (unsigned int k = threadIdx.x; k < count; k += blockDim.x)
        spikes[offset + k] = segments[(size_t)blockIdx.x * block_capacity + k];
    if (blockIdx.x == blocks - 1 && threadIdx.x == 0) {
        unsigned int total = offset + count, over = 0u;
        for (int b = 0; b < blocks; ++b) over |= block_spikes[b] > block_capacity;
        *nspikes = over ? 0xffffffffu : total;
    }
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
