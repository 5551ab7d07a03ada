"""The network domain's manifest: the one place that says what the domain is and where its parts live."""

from app.sims.common.registry import Domain

DOMAIN = Domain(
    name="network",
    label="Cultured network",
    module="app.sims.network",
    description=("A developing culture of leaky integrate-and-fire neurons with dynamic synapses and "
                 "activity-dependent neurite growth (UW Bothell)."),
    order=30,
    engines={
        "cpu-reference": "app.sims.network.cpu:CpuEngine",
        "cpu": "app.sims.network.compiled:CompiledEngine",
        "cuda": "app.sims.network.cuda:CudaEngine",
    },
    panel="app.gui.panels.network:NetworkPanel",
    main_plot="app.gui.main_plots:network",
    bench="app.sims.network.bench",
    exports={"neuroml": "app.sims.network.export_neuroml:export_run",
             "nwb": "app.sims.network.export_nwb:export_run"},
)
