"""BioGPU Studio: interactive GPU biological simulations."""

import os

__version__ = "0.1.0"

# numba's OpenMP threads spin after each parallel region by default. On a machine with few
# cores the spinning takes the cores the serial part between regions needs (measured on the
# 2-core VM: the cardiac sheet preset 8.1 -> 5.0 s, SSA decay-dimerization 7.5 -> 3.9 s, the
# network lesson 13.9 -> 6.6 s with PASSIVE); with many cores spinning threads answer the next
# region at once (the H100 host's 16 cores: the 100x100 network 8.9 s ACTIVE, 22.4 s PASSIVE).
# Set before numba starts its OpenMP runtime; a user's own setting wins.
if (os.cpu_count() or 1) <= 4:
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
