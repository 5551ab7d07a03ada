"""Simulation domains. Each subpackage holds a model spec, a CPU engine, a CUDA engine and metrics.

Nothing in ``app.sims`` imports Qt, and everything imports without a GPU.
"""
