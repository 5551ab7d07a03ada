"""A cultured-network run as a NeuroML2 network (through libNeuroML): cells, positions,
Tsodyks-Markram synapses and the connections at a chosen epoch (by default the end of the run).

Epoch N (0 to the run's epochs) is the connectivity after the growth update that ends epoch N,
the one epoch N + 1 ran with: epoch 0 is the start (every radius ``growth.start_radius``). It
is rebuilt from the run's per-epoch radii (``epoch_radius``) with the engines' overlap rule,
which gives the run's own connectivity exactly (the last epoch is the run's ``final_W``).

Cells: one ``iafRefCell`` per distinct (inhibitory, threshold, reset, refractory period) set
(starter neurons draw their thresholds, so each starter is its own cell type), with
``C = Cm``, ``leakConductance = 1/Rm``, ``leakReversal = Vrest``: the same leaky integrator
as the engines, and the refractory period the engines hold a neuron at reset (the spike's
step and ``Trefract`` after it). The constant injected current ``Iinject`` is a ``pulseGenerator`` lasting the
run, given to every neuron. Each cell type is a ``populationList`` whose instances sit at the
neurons' grid positions (x, y, 0; one grid unit per NeuroML length unit).

Synapses: one ``blockingPlasticSynapse`` per synapse class (EE, EI, IE, II) carrying a
``tsodyksMarkramDepFacMechanism`` with the class's U (``initReleaseProb``), recovery and
facilitation time constants, and its decay time constant. Connections (``connectionWD``) carry
the engines' latency, (delay + 1) steps (a spike at step s changes the target's voltage from
step s + delay + 1 on), and the weight that gives each event the engines' charge
(:func:`charge_weight`).

Approximations (NeuroML2 has no current-based plastic synapse): the engines' synapses add a
current ``W u r``, held over each step and decaying by ``exp(-dt/tau)`` per step; the NeuroML
synapse is conductance-based, ``g (erev - v)``, with ``erev = Vrest +/- DRIVE`` (1 kV: over
the neurons' 0-15 mV range the driving force is within 1.5e-5 of DRIVE) and a rise time of
``tau / 100`` (the double exponential's peak is normalised to ``gbase``; the weight matches
the charge, so the peak is 4.5 % below the engines'). Not written: the noise current (NeuroML2 has
no Gaussian white-noise input), the initial voltage ``Vinit`` (an ``iafRefCell`` starts at
its leak reversal), the growth of the neurites (the connections are those of one epoch).
Refused, by name: more than :data:`MAX_CONNECTIONS` synapses, an epoch the run does not hold.

:func:`to_lems` writes the LEMS simulation of the file (one epoch, every neuron's spikes).
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Mapping
from xml.sax.saxutils import quoteattr

import numpy as np

from app.sims.common.config import ConfigError

DRIVE = 1.0e3             # V: |erev - Vrest| of the conductance-based synapses (current-like)
RISE_FRACTION = 0.01      # tauRise / tauDecay
MAX_CONNECTIONS = 200_000  # libNeuroML holds a Python object per connection
CLASSES = ("EE", "EI", "IE", "II")


def charge_weight(tau: float, dt: float, gbase: float) -> float:
    """NeuroML weight per ampere of W: an event of weight w on an expTwoSynapse carries
    gbase·DRIVE·w·f·(tauDecay - tauRise) (f its peak normalisation); the engines' current W,
    held over each step and decaying by exp(-dt/tau) per step, carries W·dt/(1 - exp(-dt/tau))."""
    rise = tau * RISE_FRACTION
    peak = np.log(tau / rise) * rise * tau / (tau - rise)
    normalisation = 1.0 / (np.exp(-peak / tau) - np.exp(-peak / rise))
    engines = dt / -np.expm1(-dt / tau)
    return float(engines / (gbase * DRIVE * normalisation * (tau - rise)))


def _q(value: float, unit: str) -> str:
    return f"{float(value)!r}{unit}"


def epoch_connectivity(cfg, arrays: Mapping[str, np.ndarray], epoch: int | None):
    """(pre, post, W) of the run at ``epoch`` (None: the end of the run); ConfigError naming
    the epochs the run holds when it does not hold this one."""
    from app.sims.network.model import Constants, build_culture, connectivity
    done = np.asarray(arrays.get("epoch_mean_rate", []), float).size
    if epoch is None or epoch == done:
        return (np.asarray(arrays["final_W_pre"], np.int64), np.asarray(arrays["final_W_post"], np.int64),
                np.asarray(arrays["final_W"], float))
    if "epoch_radius" not in arrays:
        raise ConfigError(f"--epoch {epoch}: this run folder keeps only the connectivity at the end "
                          f"(epoch {done}); runs written by this version keep every epoch")
    radii = np.asarray(arrays["epoch_radius"], float)
    if not 0 <= epoch <= done:
        raise ConfigError(f"--epoch {epoch}: the run holds epochs 0 (the start) to {done} (its end)")
    culture = build_culture(cfg)
    radius = np.full(culture.n, cfg.growth.start_radius) if epoch == 0 else radii[epoch - 1]
    if not np.isfinite(radius).all():
        kept = np.flatnonzero(np.isfinite(radii).all(axis=1)) + 1
        held = (f"its end (epoch {done})" if kept.size == 0 else f"epoch {kept.min()}" if kept.size == 1
                else f"epochs {kept.min()} to {kept.max()}")
        raise ConfigError(f"--epoch {epoch}: the run was resumed from a checkpoint that did not keep "
                          f"this epoch; it holds epoch 0 and {held}")
    conn = connectivity(culture.width, culture.height, radius, culture.inhibitory,
                        Constants.from_config(cfg).weight_scale)
    return conn.pre, conn.post, conn.W


def cell_types(culture) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(types: rows of inhibitory, threshold, reset, refractory steps; each neuron's type; its
    index within its type's population)."""
    keys = np.stack([culture.inhibitory, culture.vthresh, culture.vreset, culture.trefract], 1)
    groups, group_of = np.unique(keys, axis=0, return_inverse=True)
    group_of = group_of.ravel()
    index_in_group = np.zeros(culture.n, np.int64)
    for g in range(len(groups)):
        members = np.flatnonzero(group_of == g)
        index_in_group[members] = np.arange(members.size)
    return groups, group_of, index_in_group


def to_lems(cfg, nml_name: str, network_id: str = "culture", spikes_file: str = "spikes.dat") -> str:
    """A LEMS simulation of the written network (``jnml LEMS_x.xml``): one epoch
    (``run.epoch_seconds``) at the run's dt split into sub-steps of at most a third of the
    shortest synaptic rise time (forward Euler stays stable and accurate), every neuron's
    spikes to ``spikes_file`` as (time, neuron index on the grid)."""
    from app.sims.network.model import build_culture
    culture = build_culture(cfg)
    _, group_of, index_in_group = cell_types(culture)
    shortest_rise = min(syn.tau for syn in cfg.synapses.types()) * RISE_FRACTION
    substeps = int(np.ceil(cfg.run.dt / (shortest_rise / 3.0)))
    selections = "\n".join(
        f'      <EventSelection id="{i}" select="pop_{g}/{k}/cell_{g}" eventPort="spike"/>'
        for i, (g, k) in enumerate(zip(group_of, index_in_group)))
    length, step = _q(cfg.run.epoch_seconds, "s"), _q(cfg.run.dt / substeps, "s")
    return f"""<Lems>
  <!-- The exported network: one epoch, every neuron's spikes (time in s, neuron index) -->
  <Target component="sim"/>
  <Include file="NeuroML2CoreTypes.xml"/>
  <Include file="Simulation.xml"/>
  <Include file={quoteattr(nml_name)}/>
  <Simulation id="sim" length="{length}" step="{step}" target="{network_id}_net">
    <EventOutputFile id="spikes" fileName={quoteattr(spikes_file)} format="TIME_ID">
{selections}
    </EventOutputFile>
  </Simulation>
</Lems>
"""


def to_neuroml(cfg, arrays: Mapping[str, np.ndarray], network_id: str = "culture",
               epoch: int | None = None) -> str:
    """The NeuroML2 document (XML text) of run config ``cfg`` with its results ``arrays``
    (``inhibitory``, ``final_W``, ``final_W_pre``, ``final_W_post``, ``epoch_radius``) and the
    connectivity of ``epoch`` (None: the end of the run)."""
    import neuroml
    from neuroml.writers import NeuroMLWriter

    from app.sims.network.model import build_culture, synapse_type
    pre, post, weight = epoch_connectivity(cfg, arrays, epoch)
    if pre.size > MAX_CONNECTIONS:
        raise ConfigError(f"cannot export to NeuroML2: the run has {pre.size:,} synapses; this export "
                          f"writes at most {MAX_CONNECTIONS:,}")
    culture = build_culture(cfg)
    if not np.array_equal(culture.inhibitory, np.asarray(arrays["inhibitory"], bool)):
        raise ConfigError("the run's config does not rebuild its culture (inhibitory neurons differ)")
    nr, dt = cfg.neuron, cfg.run.dt
    doc = neuroml.NeuroMLDocument(id=network_id, notes="Cultured network simulated by BioGPU Studio.")
    groups, group_of, index_in_group = cell_types(culture)
    net = neuroml.Network(id=f"{network_id}_net", type="networkWithTemperature", temperature="37degC")
    x, y = culture.positions()
    for g, (inh, vth, vre, tref) in enumerate(groups):     # C in nF: jLEMS reads "3e-08F" as a Java float
        cell_id = f"cell_{g}"
        doc.iaf_ref_cells.append(neuroml.IafRefCell(    # refractory: the spike's step and tref more
            id=cell_id, leak_reversal=_q(nr.Vrest, "V"), thresh=_q(vth, "V"), reset=_q(vre, "V"),
            C=_q(nr.Cm * 1e9, "nF"), leak_conductance=_q(1.0 / nr.Rm, "S"), refract=_q((tref + 1) * dt, "s"),
            notes="inhibitory" if inh else "excitatory"))
        members = np.flatnonzero(group_of == g)
        pop = neuroml.Population(id=f"pop_{g}", component=cell_id, size=int(members.size), type="populationList")
        for k, i in enumerate(members):
            where = neuroml.Location(x=float(x[i]), y=float(y[i]), z=0.0)
            pop.instances.append(neuroml.Instance(id=k, location=where))
        net.populations.append(pop)
    duration = cfg.run.epochs * cfg.run.epoch_seconds
    doc.pulse_generators.append(neuroml.PulseGenerator(id="inject", delay="0s", duration=_q(duration, "s"),
                                                       amplitude=_q(nr.Iinject, "A")))
    for g in range(len(groups)):
        members = np.flatnonzero(group_of == g)
        inputs = neuroml.InputList(id=f"inject_{g}", populations=f"pop_{g}", component="inject")
        for k in range(members.size):
            inputs.input.append(neuroml.Input(id=k, target=f"../pop_{g}/{k}/cell_{g}", destination="synapses"))
        net.input_lists.append(inputs)
    gbase = 1e-9
    delays = cfg.delay_steps()
    per_ampere = [charge_weight(syn.tau, dt, gbase) for syn in cfg.synapses.types()]
    for name, syn in zip(CLASSES, cfg.synapses.types()):
        erev = nr.Vrest - DRIVE if name[0] == "I" else nr.Vrest + DRIVE
        doc.blocking_plastic_synapses.append(neuroml.BlockingPlasticSynapse(
            id=f"syn_{name}", gbase=_q(gbase, "S"), erev=_q(erev, "V"), tau_decay=_q(syn.tau, "s"),
            tau_rise=_q(syn.tau * RISE_FRACTION, "s"),
            plasticity_mechanism=neuroml.PlasticityMechanism(
                type="tsodyksMarkramDepFacMechanism", init_release_prob=float(syn.U),
                tau_rec=_q(syn.tau_rec, "s"), tau_fac=_q(syn.tau_facil, "s"))))
    kind = synapse_type(culture.inhibitory[pre], culture.inhibitory[post])
    projections: dict[tuple[int, int, int], neuroml.Projection] = {}
    for s in np.lexsort((post, pre)):
        key = (int(group_of[pre[s]]), int(group_of[post[s]]), int(kind[s]))
        proj = projections.get(key)
        if proj is None:
            proj = neuroml.Projection(id=f"proj_{key[0]}_{key[1]}_{CLASSES[key[2]]}",
                                      presynaptic_population=f"pop_{key[0]}", postsynaptic_population=f"pop_{key[1]}",
                                      synapse=f"syn_{CLASSES[key[2]]}")
            projections[key] = proj
            net.projections.append(proj)
        proj.connection_wds.append(neuroml.ConnectionWD(
            id=len(proj.connection_wds),
            pre_cell_id=f"../pop_{key[0]}/{index_in_group[pre[s]]}/cell_{key[0]}",
            post_cell_id=f"../pop_{key[1]}/{index_in_group[post[s]]}/cell_{key[1]}",
            weight=float(abs(weight[s]) * per_ampere[key[2]]), delay=_q((delays[key[2]] + 1) * dt, "s")))
    doc.networks.append(net)
    buf = _Buffer()
    NeuroMLWriter.write(doc, buf)
    return buf.getvalue()


class _Buffer(io.StringIO):
    """A StringIO the writer may close (it does) and that we still read."""

    def close(self) -> None:
        pass


def lems_path(out: str | Path) -> Path:
    """The LEMS simulation written beside the NeuroML2 file ``out``: ``LEMS_<name>.xml``."""
    return Path(out).with_name(f"LEMS_{Path(out).stem}.xml")


def write_run(cfg, arrays: Mapping[str, np.ndarray], out: str | Path, epoch: int | None = None) -> Path:
    """A finished run of ``cfg`` (its results ``arrays``) as a validated NeuroML2 file, with
    the connectivity of ``epoch`` (None: the end of the run), and beside it the LEMS file
    that simulates it (:func:`lems_path`)."""
    from app.sims.common.export import validate_neuroml
    from app.sims.common.output import save_text
    if "final_W" not in arrays or "inhibitory" not in arrays:
        raise ConfigError("no finished run to export (its connectivity is written at the end)")
    out = save_text(out, to_neuroml(cfg, arrays, epoch=epoch))
    validate_neuroml(out)
    save_text(lems_path(out), to_lems(cfg, out.name, spikes_file=f"{out.stem}.spikes.dat"))
    return out


def export_run(folder: Path, out: Path, epoch: int | None = None) -> list[Path]:
    """``biogpu export RUN --to neuroml [--epoch N]``: the culture at epoch N (default the end)."""
    from app.sims.common.export import load_results, load_run
    nml = write_run(load_run(folder), load_results(folder), out, epoch)
    return [nml, lems_path(nml)]
