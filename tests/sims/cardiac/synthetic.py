"""Small CellML 1.0 models written for the importer's tests (no file from elsewhere)."""

from pathlib import Path

HEAD = """<?xml version="1.0" encoding="UTF-8"?>
<model xmlns="http://www.cellml.org/cellml/1.0#" xmlns:cellml="http://www.cellml.org/cellml/1.0#"
       xmlns:cmeta="http://www.cellml.org/metadata/1.0#" name="synthetic_cell">
  <units name="ms"><unit units="second" prefix="milli"/></units>
  <units name="mV"><unit units="volt" prefix="milli"/></units>
  <units name="per_ms"><unit units="ms" exponent="-1"/></units>
  <units name="mV_per_ms"><unit units="mV"/><unit units="ms" exponent="-1"/></units>
  <units name="mM"><unit units="mole" prefix="milli"/><unit units="litre" exponent="-1"/></units>
  <units name="mM_per_ms"><unit units="mM"/><unit units="ms" exponent="-1"/></units>
  <component name="cell">
    <variable name="time" units="ms" cmeta:id="time"/>
    <variable name="V" units="mV" initial_value="-80" cmeta:id="V"/>
    <variable name="n" units="dimensionless" initial_value="0.1"/>
    <variable name="K_i" units="mM" initial_value="140"/>
    <variable name="i_stim" units="mV_per_ms" cmeta:id="i_stim"/>
    <variable name="amp" units="mV_per_ms" initial_value="%(amp)s" cmeta:id="amp"/>
    <variable name="dur" units="ms" initial_value="%(dur)s" cmeta:id="dur"/>
    <variable name="per" units="ms" initial_value="%(per)s" cmeta:id="per"/>
    <variable name="off" units="ms" initial_value="%(off)s" cmeta:id="off"/>
    <variable name="g" units="per_ms" initial_value="0.1" cmeta:id="g"/>
    <math xmlns="http://www.w3.org/1998/Math/MathML">
      <apply><eq/><ci>i_stim</ci>
        <piecewise>
          <piece><ci>amp</ci>
            <apply><and/>
              <apply><geq/><apply><minus/><ci>time</ci><apply><times/><ci>per</ci>
                <apply><floor/><apply><divide/><apply><minus/><ci>time</ci><ci>off</ci></apply><ci>per</ci></apply></apply>
              </apply></apply><ci>off</ci></apply>
              <apply><leq/><apply><minus/><ci>time</ci><apply><times/><ci>per</ci>
                <apply><floor/><apply><divide/><apply><minus/><ci>time</ci><ci>off</ci></apply><ci>per</ci></apply></apply>
              </apply></apply><apply><plus/><ci>off</ci><ci>dur</ci></apply></apply>
            </apply></piece>
          <otherwise><cn cellml:units="mV_per_ms">0</cn></otherwise>
        </piecewise></apply>
      <apply><eq/><apply><diff/><bvar><ci>time</ci></bvar><ci>V</ci></apply>
        <apply><minus/><apply><times/><apply><minus/><ci>g</ci></apply><ci>n</ci>
          <apply><minus/><ci>V</ci><cn cellml:units="mV">-80</cn></apply></apply><ci>i_stim</ci></apply></apply>
      <apply><eq/><apply><diff/><bvar><ci>time</ci></bvar><ci>n</ci></apply>
        <apply><divide/><apply><minus/>
          <apply><divide/><cn cellml:units="dimensionless">1</cn><apply><plus/><cn cellml:units="dimensionless">1</cn>
            <apply><exp/><apply><divide/><apply><minus/><cn cellml:units="mV">-40</cn><ci>V</ci></apply>
              <cn cellml:units="mV">5</cn></apply></apply></apply></apply>
          <ci>n</ci></apply><cn cellml:units="ms">10</cn></apply></apply>
      <apply><eq/><apply><diff/><bvar><ci>time</ci></bvar><ci>K_i</ci></apply><cn cellml:units="mM_per_ms">%(dk)s</cn></apply>
    </math>
  </component>
  <rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#"
           xmlns:bqbiol="http://biomodels.net/biology-qualifiers/">
%(rdf)s  </rdf:RDF>
</model>
"""
OXMETA = "https://chaste.comlab.ox.ac.uk/cellml/ns/oxford-metadata#"
TERMS = {"time": "time", "V": "membrane_voltage", "i_stim": "membrane_stimulus_current",
         "amp": "membrane_stimulus_current_amplitude", "dur": "membrane_stimulus_current_duration",
         "per": "membrane_stimulus_current_period", "off": "membrane_stimulus_current_offset",
         "g": "membrane_fast_sodium_current_conductance"}


def write_model(folder: Path, amp: float = -25.0, dur: float = 1.5, per: float = 400.0, off: float = 20.0,
                dk: float = 0.0, annotate: tuple[str, ...] = tuple(TERMS)) -> Path:
    """A one-gate cell: dV/dt = -g·n·(V + 80) - i_stim, a logistic gate n, dK_i/dt = ``dk``
    (0: a concentration held fixed, a state all the same), the stimulus pulse train annotated."""
    rdf = "".join(f'    <rdf:Description rdf:about="#{v}"><bqbiol:is rdf:resource="{OXMETA}{TERMS[v]}"/>'
                  f"</rdf:Description>\n" for v in annotate)
    path = Path(folder) / "synthetic_cell.cellml"
    path.write_text(HEAD % dict(amp=amp, dur=dur, per=per, off=off, dk=dk, rdf=rdf))
    return path


def _apply(op: str, *args: str) -> str:
    return f"<apply><{op}/>{''.join(args)}</apply>"


def _ci(name: str) -> str:
    return f"<ci>{name}</ci>"


def _cn(value: float, units: str = "dimensionless") -> str:
    return f'<cn cellml:units="{units}">{value!r}</cn>'


def _rate(k: float, slope_mV: float) -> str:
    """k·exp(V/slope) in 1/ms."""
    return _apply("times", _cn(k, "per_ms"), _apply("exp", _apply("divide", _ci("V"), _cn(slope_mV, "mV"))))


def _ode(state: str, rhs: str) -> str:
    return _apply("eq", f"<apply><diff/><bvar><ci>time</ci></bvar><ci>{state}</ci></apply>", rhs)


MARKOV_RATES = {"a1": (0.05, 20.0), "b1": (0.01, -25.0), "a2": (2.0, 20.0), "b2": (5.0, -40.0)}


def write_markov_model(folder: Path, sodium: bool = True, tubule: tuple[float, float] | None = None) -> Path:
    """A cell whose repolarising current flows through a stiff three-state Markov chain
    C ⇌ O ⇌ I (C→O a1, O→C b1, O→I a2, I→O b2, each k·exp(V/s) per :data:`MARKOV_RATES`;
    O⇌I at |λ| ≈ 37/ms at rest): dV/dt = -(gK·O·(V + 90) + gL·(V + 80) + gNa·m·h·(V − 40)) − i_stim
    with Hodgkin-Huxley gates m (activation, 1 ms) and h (inactivation, 100 ms); the stimulus is the annotated -20 µA/µF for 2 ms every 500 ms
    from 10 ms. C, O and I are gates coupled to each other (each one's b reads the others).
    ``sodium=False``: no sodium current and no m, h (the chain is the only gating).
    ``tubule=(g_st, g_tt)`` (1/ms): a second membrane potential Vt (a t-tubule's, a leak to −80 mV
    of 0.02·exp((Vt + 80)/40) per ms: not affine in Vt, so not a gate) coupled to V by −g_st·(V − Vt) in dV/dt and g_tt·(V − Vt) in dVt/dt: the two
    exchange at √(g_st·g_tt) (Pasek's surface and t-tubular potentials)."""
    a1, b1, a2, b2 = (_rate(*MARKOV_RATES[k]) for k in ("a1", "b1", "a2", "b2"))
    mult = _apply
    currents = _apply("plus",
                      mult("times", _cn(0.5, "per_ms"), _ci("O"), _apply("plus", _ci("V"), _cn(90.0, "mV"))),
                      mult("times", _cn(0.02, "per_ms"), _apply("plus", _ci("V"), _cn(80.0, "mV"))),
                      *[mult("times", _cn(1.0, "per_ms"), _ci("m"), _ci("h"), _apply("minus", _ci("V"), _cn(40.0, "mV")))
                        ] * sodium)
    m_inf = _apply("divide", _cn(1.0), _apply("plus", _cn(1.0), _apply("exp", _apply(
        "divide", _apply("minus", _cn(-40.0, "mV"), _ci("V")), _cn(4.0, "mV")))))
    h_inf = _apply("divide", _cn(1.0), _apply("plus", _cn(1.0), _apply("exp", _apply(
        "divide", _apply("plus", _ci("V"), _cn(50.0, "mV")), _cn(4.0, "mV")))))
    pulse = _apply("minus", _ci("time"), _apply("times", _ci("per"), _apply("floor", _apply(
        "divide", _apply("minus", _ci("time"), _ci("off")), _ci("per")))))
    stim = (f"<apply><eq/><ci>i_stim</ci><piecewise><piece><ci>amp</ci>"
            f"{_apply('and', _apply('geq', pulse, _ci('off')), _apply('leq', pulse, _apply('plus', _ci('off'), _ci('dur'))))}"
            f"</piece><otherwise>{_cn(0.0, 'mV_per_ms')}</otherwise></piecewise></apply>")
    if tubule:
        currents = _apply("plus", currents, mult("times", _cn(tubule[0], "per_ms"), _apply("minus", _ci("V"), _ci("Vt"))))
    math = "".join([
        stim,
        _ode("V", _apply("minus", _apply("minus", currents), _ci("i_stim"))),
        *[_ode("Vt", _apply("minus", mult("times", _cn(g_tt, "per_ms"), _apply("minus", _ci("V"), _ci("Vt"))),
                            mult("times", _cn(0.02, "per_ms"), _apply("plus", _ci("Vt"), _cn(80.0, "mV")),
                                 _apply("exp", _apply("divide", _apply("plus", _ci("Vt"), _cn(80.0, "mV")),
                                                      _cn(40.0, "mV"))))))
          for g_tt in (tubule or ())[1:]],
        *[_ode("m", _apply("divide", _apply("minus", m_inf, _ci("m")), _cn(1.0, "ms"))),
          _ode("h", _apply("divide", _apply("minus", h_inf, _ci("h")), _cn(100.0, "ms")))] * sodium,
        _ode("C", _apply("minus", _apply("times", b1, _ci("O")), _apply("times", a1, _ci("C")))),
        _ode("O", _apply("minus", _apply("plus", _apply("times", a1, _ci("C")), _apply("times", b2, _ci("I"))),
                         _apply("times", _apply("plus", b1, a2), _ci("O")))),
        _ode("I", _apply("minus", _apply("times", a2, _ci("O")), _apply("times", b2, _ci("I")))),
    ])
    variables = "".join(f'    <variable name="{n}" units="dimensionless" initial_value="{v!r}"/>\n'
                        for n, v in (("m", 0.0), ("h", 1.0), ("C", 1.0), ("O", 0.0), ("I", 0.0))
                        if sodium or n not in "mh")
    variables += '    <variable name="Vt" units="mV" initial_value="-80.0"/>\n' * bool(tubule)
    text = HEAD.split('    <variable name="n"')[0] + variables + "".join(
        line + "\n" for line in HEAD.splitlines() if any(f'name="{n}"' in line for n in ("i_stim", "amp", "dur", "per", "off")))
    text += f'    <math xmlns="http://www.w3.org/1998/Math/MathML">{math}</math>\n  </component>\n'
    text += HEAD.split("  </component>\n", 1)[1]
    rdf = "".join(f'    <rdf:Description rdf:about="#{v}"><bqbiol:is rdf:resource="{OXMETA}{TERMS[v]}"/>'
                  f"</rdf:Description>\n" for v in ("time", "V", "i_stim", "amp", "dur", "per", "off"))
    path = Path(folder) / "markov_cell.cellml"
    path.write_text(text % dict(amp=-20.0, dur=2.0, per=500.0, off=10.0, rdf=rdf))
    return path


def markov_run(path: Path, solver: str, t_end: float = 300.0) -> str:
    """The config text of one beat of :func:`write_markov_model`'s cell (its annotated
    stimulus at 10 ms; the action potential ends near 252 ms) with the ``solver`` block,
    recording every step."""
    return (f"model: {{file: '{path}'}}\nmesh: {{kind: single}}\nprotocol: {{t_end: {t_end!r}}}\n"
            f"solver: {solver}\noutput: {{dt_save: 0.0}}\n")


def trace_difference(arrays, reference) -> float:
    """max |V − V_ref| (mV) of two single-cell traces on a 0.05 ms grid."""
    import numpy as np
    t = np.arange(0.0, float(reference["cell_t"][-1]), 0.05)
    return float(np.max(np.abs(np.interp(t, arrays["cell_t"], arrays["cell_states"][:, 0])
                               - np.interp(t, reference["cell_t"], reference["cell_states"][:, 0]))))
