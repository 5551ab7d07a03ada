"""The ssa domain's manifest: the one place that says what the domain is and where its parts live."""

from app.sims.common.registry import Domain

DOMAIN = Domain(
    name="ssa",
    label="SSA histograms",
    module="app.sims.ssa",
    description=("Ensembles of Gillespie simulations, one realization per GPU thread, with live "
                 "histograms (Li & Petzold 2010)."),
    order=50,
    engines={
        "cpu-reference": "app.sims.ssa.cpu:CpuEnsemble",
        "cpu": "app.sims.ssa.compiled:CompiledEnsemble",
        "cuda": "app.sims.ssa.cuda:CudaEnsemble",
    },
    panel="app.gui.panels.ssa:SSAPanel",
    main_plot="app.gui.main_plots:ssa",
    bench="app.sims.ssa.bench",
)
