"""Every kernel source has its compile test: ``kernels/<name>.cu`` is compiled, with every
generated variant, in ``tests/compute/test_kernel_compile_<name>.py``."""

from pathlib import Path

from app.compute.kernels import KERNEL_DIR


def test_every_kernel_file_has_a_compile_test():
    here = Path(__file__).parent
    sources = sorted(KERNEL_DIR.glob("*.cu"))
    assert sources
    missing = [s.name for s in sources if not (here / f"test_kernel_compile_{s.stem}.py").exists()]
    assert not missing, f"kernels without a compile test: {missing}"
