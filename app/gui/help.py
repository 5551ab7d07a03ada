"""The Help menu's texts: About (versions, device), keyboard shortcuts, each panel's method,
and where the offline HTML documentation is."""

from __future__ import annotations

import html
import os
import platform
from importlib import metadata, resources
from pathlib import Path

DOCS_ENV = "BIOGPU_DOCS_DIR"      # a folder holding the built HTML (its index.html)

# (keys, what they do) in the order the Help menu lists them.
SHORTCUTS = (
    ("Ctrl+R", "Run the current panel"),
    ("Space", "Pause or resume the run (typing a space in a text field still types it)"),
    ("Esc", "Stop the run"),
    ("Ctrl+E", "Export the current panel's data"),
    ("Ctrl+O", "Open a run config"),
    ("Ctrl+S", "Save the current panel's run config"),
    ("Ctrl+Shift+O", "Open a workbench session"),
    ("Ctrl+Shift+S", "Save the workbench session"),
    ("Ctrl+1 … Ctrl+5", "Go to the first … fifth panel"),
    ("F1", "This panel's method and reference"),
    ("Ctrl+Q", "Quit"),
)

# domain -> (method in a few sentences, reference). HTML-safe plain text.
METHODS: dict[str, tuple[str, str]] = {
    "ssa": (
        "Gillespie's stochastic simulation algorithm (direct method, or its logarithmic "
        "direct variant) run as an ensemble: each realization is one exact sample path of the "
        "chemical master equation; the panel shows the ensemble mean ± SD and the histogram of "
        "each species at every sample time. One Philox4x32-10 random stream per realization.",
        "H. Li and L. Petzold, Efficient parallelization of the stochastic simulation algorithm "
        "for chemically reacting systems on the graphics processing unit, Int. J. High Perform. "
        "Comput. Appl. 24(2):107–116 (2010); D. T. Gillespie, J. Phys. Chem. 81:2340 (1977)."),
    "channel": (
        "A genetic algorithm fits the rate constants of a Markov ion-channel model to voltage-clamp "
        "currents: every individual's currents are simulated for all protocol sweeps (matrix "
        "exponential per voltage segment), scored by χ² against the data, then selected, crossed "
        "over and mutated.",
        "R. Ben-Shalom, A. Aviv, B. Razon and A. Korngreen, Optimizing ion channel models using a "
        "parallel genetic algorithm on graphical processors, J. Neurosci. Methods 206(2):183–194 "
        "(2012)."),
    "cardiac": (
        "The monodomain reaction-diffusion equation on a sheet or a sphere with the Courtemanche "
        "human atrial cell model; Rush–Larsen forward Euler (RLFE) or adaptive Bogacki–Shampine "
        "3(2) time stepping, operator splitting of diffusion and reaction.",
        "V. M. García-Mollá et al., Adaptive step ODE algorithms for the 3D simulation of electric "
        "heart activity with graphics processing units, Comput. Biol. Med. 44:15–26 (2014); "
        "M. Courtemanche, R. J. Ramirez and S. Nattel, Am. J. Physiol. 275:H301 (1998)."),
    "network": (
        "Leaky integrate-and-fire neurons on a grid with dynamic (depressing/facilitating) "
        "synapses whose weights follow the overlap of growing neurite circles; after each activity "
        "epoch every radius grows or shrinks towards a target firing rate (activity-dependent "
        "outgrowth), so the culture develops from silence to network bursts.",
        "The BrainGrid cultured-network simulator ported to the GPU, University of Washington "
        "Bothell (shared/papers/cultured-network-gpu_uw-bothell); its growth model follows "
        "A. van Ooyen and J. van Pelt, J. Theor. Biol. 167:27–43 (1994)."),
    "epidermis": (
        "The subcellular element method: each cell is a cloud of elements bound by Morse "
        "potentials, pressed onto a basement membrane, with a Notch/Delta/Ovol gene network "
        "coupling neighbours; cells grow, divide and leave the membrane to form suprabasal layers.",
        "S. Christley, B. Lee, X. Dai and Q. Nie, Integrative multicellular biological modeling: a "
        "case study of 3D epidermal development using GPU algorithms, BMC Syst. Biol. 4:107 (2010)."),
}


def _version(package: str) -> str:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "not installed"


def about_html(device: str, driver: str) -> str:
    """The About box: the app's version, Python/Qt/PyCUDA/numba versions, driver and device."""
    import PySide6
    from PySide6.QtCore import qVersion

    from app import __version__

    rows = (("BioGPU Studio", __version__), ("Python", platform.python_version()),
            ("Qt / PySide6", f"{qVersion()} / {PySide6.__version__}"),
            ("PyCUDA", _version("pycuda")), ("numba", _version("numba")),
            ("NumPy", _version("numpy")), ("CUDA driver", driver or "none"),
            ("Device", device))
    table = "".join(f"<tr><td><b>{k}</b></td><td>{v}</td></tr>" for k, v in rows)
    return ("<p>A workbench of GPU and compiled-CPU biological simulations: stochastic "
            "chemistry, ion-channel fitting, cardiac tissue, cultured networks and epidermis.</p>"
            f"<table cellspacing='4'>{table}</table>")


def shortcuts_html() -> str:
    rows = "".join(f"<tr><td><b>{k}</b></td><td>{v}</td></tr>" for k, v in SHORTCUTS)
    return f"<table cellspacing='4'>{rows}</table>"


def method_html(domain: str, label: str) -> str:
    method, reference = METHODS.get(domain, ("", ""))
    return f"<h3>{label}</h3><p>{method}</p><p><b>Reference.</b> {reference}</p>"


def docs_candidates() -> list[Path]:
    """Where the built HTML documentation's ``index.html`` may be, in the order looked at: the
    folder ``$BIOGPU_DOCS_DIR``, the copy inside the installed package (``app/_data/docs``, put
    there by the wheel and bundle builds after ``make docs``), a checkout's ``docs/_build/html``."""
    found = []
    if os.environ.get(DOCS_ENV):
        found.append(Path(os.environ[DOCS_ENV]).expanduser() / "index.html")
    package = Path(str(resources.files("app")))
    found.append(package / "_data" / "docs" / "index.html")
    found.append(package.resolve().parent / "docs" / "_build" / "html" / "index.html")
    return found


def docs_index() -> Path | None:
    """The offline documentation's ``index.html``, or None where it has not been built."""
    return next((p for p in docs_candidates() if p.is_file()), None)


def docs_missing_html() -> str:
    """What to do when no built documentation is found (shown instead of opening it)."""
    looked = "".join(f"<li><code>{html.escape(str(p))}</code></li>" for p in docs_candidates())
    return ("<p>The documentation has not been built on this machine.</p>"
            "<p>In a copy of the source tree, run <code>make docs</code> (it installs Sphinx, "
            "MyST-Parser and the Furo theme into <code>.venv</code> and writes "
            "<code>docs/_build/html</code>), then choose Help › Documentation again. "
            f"Or set <code>{DOCS_ENV}</code> to a folder with the built HTML.</p>"
            f"<p>Looked for:</p><ul>{looked}</ul>")
