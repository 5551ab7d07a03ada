"""Write resources/models/cardiac/courtemanche_1998_ikach.cellml: the shipped CRN model plus
the acetylcholine-activated K+ current of Kneller et al. 2002 (Circ Res 90:E73), pA:

    i_KACh = Cm * 10/(1 + 9.13652/ACh^0.477811) * (0.0517 + 0.4516/(1 + exp((V + 59.53)/17.18))) * (V - E_K)

(ACh in µmol/L; zero when ACh = 0, the default). It joins the K+ currents in dV/dt and
d[K+]i/dt. The constants are the ones Kneller's canine model carried into later atrial models,
checked against secondary implementations, not against the paper's PDF. Myokit reads the CRN
file, the component is added with Myokit's model API and Myokit's CellML 1.0 writer writes the
file (oxmeta annotations kept). Run from the repository root: ``python scripts/cardiac/make_crn_ikach.py``.
"""

import sys
from pathlib import Path

import myokit
import myokit.formats.cellml as mcellml

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from app.sims.cardiac.cellml import _annotations  # noqa: E402
SOURCE = ROOT / "resources" / "models" / "cardiac" / "courtemanche_ramirez_nattel_1998.cellml"
TARGET = SOURCE.with_name("courtemanche_1998_ikach.cellml")


def main() -> None:
    model = mcellml.CellMLImporter().model(str(SOURCE))
    for (comp, var), term in _annotations(SOURCE).items():
        try:
            model.get(f"{comp}.{var}").meta["oxmeta"] = term
        except Exception:
            continue
    comp = model.add_component("acetylcholine_dependent_K_current")
    ach = comp.add_variable("ACh")
    ach.set_unit(myokit.parse_unit("uM"))
    ach.set_rhs(myokit.Number(0.0, myokit.parse_unit("uM")))
    i = comp.add_variable("i_KACh")
    i.set_unit(myokit.parse_unit("pA"))
    i.set_rhs(
        "if(ACh > 0 [uM], membrane.Cm * 10 [pA/pF/mV] / (1 + 9.13652 [uM^0.477811] / ACh^0.477811)"
        " * (0.0517 + 0.4516 / (1 + exp((membrane.V + 59.53 [mV]) / 17.18 [mV])))"
        " * (membrane.V - time_independent_potassium_current.E_K), 0 [pA])")
    for qname, last in (("membrane.V", "L_type_Ca_channel.i_Ca_L"),
                        ("intracellular_ion_concentrations.K_i", "background_currents.i_B_K")):
        var = model.get(qname)
        code = var.rhs().code()
        assert code.count(last) == 1, qname
        var.set_rhs(code.replace(last, f"{last} + acetylcholine_dependent_K_current.i_KACh"))
    model.set_name("courtemanche_1998_ikach")
    model.validate()
    mcellml.CellMLExporter().model(str(TARGET), model, version="1.0")
    print(f"wrote {TARGET}")


if __name__ == "__main__":
    main()
