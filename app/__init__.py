"""BioGPU Studio: interactive GPU biological simulations."""

__version__ = "0.1.0"
