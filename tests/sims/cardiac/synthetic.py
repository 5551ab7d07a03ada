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
