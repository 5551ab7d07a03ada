"""The cardiac domain's manifest: the one place that says what the domain is and where its parts live."""

from app.sims.common.registry import Domain

DOMAIN = Domain(
    name="cardiac",
    label="Cardiac tissue",
    module="app.sims.cardiac",
    description=("The Courtemanche atrial model on a 163,842-cell sphere and on 2D sheets, fixed and "
                 "adaptive Rush-Larsen solvers (Garcia-Molla et al. 2014)."),
    order=20,
    engines={
        "cpu-reference": "app.sims.cardiac.engine:CpuTissue",
        "cpu": "app.sims.cardiac.compiled:CompiledTissue",
        "cuda": "app.sims.cardiac.cuda:CudaTissue",
    },
    panel="app.gui.panels.cardiac:CardiacPanel",
    main_plot="app.gui.main_plots:cardiac",
    bench="app.sims.cardiac.bench",
    exports={"cellml": "app.sims.cardiac.export_cellml:export_run", "vtu": "app.sims.cardiac.export_vtu:export_run"},
    prefers_cpu="app.sims.cardiac.config:prefers_cpu",
)
