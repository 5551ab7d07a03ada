"""The epidermis domain's manifest: the one place that says what the domain is and where its parts live."""

from app.sims.common.registry import Domain

DOMAIN = Domain(
    name="epidermis",
    label="Epidermis 3D",
    module="app.sims.epidermis",
    description=("Subcellular-element cells with a Notch/Ovol gene network, growth, division and "
                 "stratification, in a 3D view (Christley et al. 2010)."),
    order=40,
    engines={
        "cpu": "app.sims.epidermis.compiled:CompiledEngine",
        "cpu-reference": "app.sims.epidermis.cpu:CpuEngine",
        "cuda": "app.sims.epidermis.cuda:CudaEngine",
    },
    panel="app.gui.panels.epidermis:EpidermisPanel",
    main_plot="app.gui.main_plots:epidermis",
    bench="app.sims.epidermis.bench",
)
