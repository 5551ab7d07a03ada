"""The same 100x100 equilibrium network (no growth) in Brian2, for the benchmark comparison.

    python -m app.sims.network.peer_brian2 --seconds 1 --target numpy --out brian2.json

Same culture (thresholds, resets, noise amplitudes, refractory periods), the same synapses
and weights (radius 2.0 everywhere), Tsodyks-Markram on each presynaptic spike with the
per-type U, tau_rec, tau_facil and delays, exponential currents (3 ms from excitatory,
6 ms from inhibitory sources), exact integration at dt = 0.1 ms, Gaussian noise current
redrawn every step. Brian2's own random numbers, so the trajectories are not the same ones.
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=1.0)
    ap.add_argument("--target", default="numpy")
    ap.add_argument("--width", type=int, default=100)
    ap.add_argument("--radius", type=float, default=2.001)
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    t_import = time.perf_counter()
    import brian2 as b2
    from app.sims.network.config import NetworkConfig
    from app.sims.network.model import Constants, build_culture, connectivity
    import dataclasses

    import_s = time.perf_counter() - t_import
    cfg = NetworkConfig()
    cfg = dataclasses.replace(cfg, culture=dataclasses.replace(cfg.culture, width=args.width, height=args.width))
    c = build_culture(cfg)
    k = Constants.from_config(cfg)
    conn = connectivity(c.width, c.height, np.full(c.n, args.radius), c.inhibitory, k.weight_scale)
    nr = cfg.neuron
    b2.prefs.codegen.target = args.target
    b2.defaultclock.dt = cfg.run.dt * b2.second
    start = time.perf_counter()
    eqs = """
    dv/dt = (Vrest - v + Rm * (gE + gI + Iinj + In)) / taum : volt (unless refractory)
    dgE/dt = -gE / tauE : amp
    dgI/dt = -gI / tauI : amp
    In = sigma * randn() : amp (constant over dt)
    sigma : amp (constant)
    vth : volt (constant)
    vr : volt (constant)
    tref : second (constant)
    """
    ns = {"Vrest": nr.Vrest * b2.volt, "Rm": nr.Rm * b2.ohm, "Iinj": nr.Iinject * b2.amp,
          "taum": nr.Rm * nr.Cm * b2.second, "tauE": cfg.synapses.EE.tau * b2.second,
          "tauI": cfg.synapses.IE.tau * b2.second}
    G = b2.NeuronGroup(c.n, eqs, threshold="v >= vth", reset="v = vr", refractory="tref",
                       method="exact", namespace=ns)
    G.v = c.vinit * b2.volt
    G.sigma = c.inoise * b2.amp
    G.vth = c.vthresh * b2.volt
    G.vr = c.vreset * b2.volt
    G.tref = c.trefract * cfg.run.dt * b2.second
    model = """w : amp (constant)
    U : 1 (constant)
    Dr : second (constant)
    Ff : second (constant)
    u : 1
    r : 1
    tl : second"""
    typ = 2 * c.inhibitory[conn.pre].astype(int) + c.inhibitory[conn.post].astype(int)
    groups = []
    for exc, target in ((True, "gE_post"), (False, "gI_post")):
        sel = ~c.inhibitory[conn.pre] if exc else c.inhibitory[conn.pre]
        S = b2.Synapses(G, G, model, on_pre=f"""
        r = 1 + (r * (1 - u) - 1) * exp(-(t - tl) / Dr)
        u = U + u * (1 - U) * exp(-(t - tl) / Ff)
        {target} += w * u * r
        tl = t""")
        S.connect(i=conn.pre[sel], j=conn.post[sel])
        ty = typ[sel]
        S.w = conn.W[sel] * b2.amp
        S.U = k.U[ty]
        S.Dr = k.D[ty] * b2.second
        S.Ff = k.F[ty] * b2.second
        S.u = k.U[ty]
        S.r = 1.0
        S.tl = -1e6 * b2.second
        S.delay = k.delay[ty] * cfg.run.dt * b2.second
        groups.append(S)
    mon = b2.SpikeMonitor(G)
    net = b2.Network(G, *groups, mon)
    setup_s = time.perf_counter() - start
    net.run(0.01 * b2.second)            # code generation / compilation
    warm_s = time.perf_counter() - start - setup_s
    t0 = time.perf_counter()
    net.run(args.seconds * b2.second)
    run_s = time.perf_counter() - t0
    result = {"brian2": b2.__version__, "target": args.target, "neurons": c.n,
              "synapses": int(conn.size), "sim_seconds": args.seconds, "run_wall_seconds": run_s,
              "wall_per_sim_second": run_s / args.seconds, "import_seconds": import_s,
              "setup_seconds": setup_s, "warmup_seconds": warm_s,
              "mean_rate_hz": mon.num_spikes / c.n / (args.seconds + 0.01)}
    print(json.dumps(result))
    if args.out:
        with open(args.out, "w") as fh:
            json.dump(result, fh, indent=2)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
