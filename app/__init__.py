"""BioGPU Studio: interactive GPU biological simulations."""

import os

__version__ = "0.1.0"

# numba's OpenMP threads spin after each parallel region by default; on a machine with few
# cores the spinning takes the cores the serial part between regions needs (measured on the
# 2-core VM: the cardiac sheet preset 8.1 -> 5.0 s, SSA decay-dimerization 7.5 -> 3.9 s, the
# network lesson 13.9 -> 6.6 s). Set before numba starts its OpenMP runtime; a user's own
# setting wins.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
