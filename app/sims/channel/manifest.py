"""The channel domain's manifest: the one place that says what the domain is and where its parts live."""

from app.sims.common.registry import Domain

DOMAIN = Domain(
    name="channel",
    label="Channel fitting",
    module="app.sims.channel",
    description=("Markov ion-channel models fitted to voltage-clamp traces by a GPU genetic algorithm, "
                 "with live convergence (Ben-Shalom et al. 2012)."),
    order=10,
    engines={
        "cpu-reference": "app.sims.channel.engine:CpuGA",
        "cpu": "app.sims.channel.compiled:CompiledGA",
        "cuda": "app.sims.channel.cuda:CudaGA",
    },
    panel="app.gui.panels.channel:ChannelPanel",
    main_plot="app.gui.main_plots:channel",
    bench="app.sims.channel.bench",
    exports={"neuroml": "app.sims.channel.export_neuroml:export_run",
             "nwb": "app.sims.channel.export_nwb:export_run"},
)
