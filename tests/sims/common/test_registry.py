"""The domain registry: built-in manifests, a domain added through an entry point, engines by
backend name."""

from importlib import metadata

import numpy as np
import pytest

from app.cli import main
from app.sims.common import registry
from app.sims.common.registry import DOMAINS, Domain
from app.sims.common.simulation import default_preset, load_run_config
from tests.plugins import DECAY_ENTRY_POINT, installed

BUILT_IN = ["channel", "cardiac", "network", "epidermis", "ssa"]


def test_built_in_domains_in_manifest_order():
    assert list(DOMAINS) == BUILT_IN
    for name, domain in DOMAINS.items():
        assert domain.name == name
        assert domain.load().Config is domain.config_class
        assert default_preset(name).parent == domain.presets_dir


@pytest.mark.parametrize("name", BUILT_IN)
def test_every_engine_path_resolves(name):
    domain = DOMAINS[name]
    assert {"cpu-reference", "cuda"} <= set(domain.engines)
    for backend in ("cpu-reference", "cpu", "cuda"):     # CUDA engines import pycuda lazily
        assert isinstance(domain.engine_class(backend), type)


def test_unknown_backend_is_an_error():
    with pytest.raises(ValueError, match="no engine for backend 'opencl'"):
        DOMAINS["ssa"].engine_class("opencl")


def test_entry_point_domain_runs_from_the_cli(tmp_path):
    with installed(DECAY_ENTRY_POINT):
        assert "decay" in DOMAINS and list(DOMAINS)[-1] == "decay"
        out = tmp_path / "run"
        assert main(["run", "decay/00-half-life", "--backend", "cpu", "--out", str(out), "--no-png"]) == 0
        results = np.load(out / "results.npz")
        domain, cfg = load_run_config(out / "config.yaml")
    assert "decay" not in DOMAINS
    s = cfg.decay
    p = np.exp(-s.rate * results["times"])
    expected, sd = s.atoms * p, np.sqrt(s.atoms * p * (1 - p) / s.realizations)
    # the ensemble mean of a binomial death process: within 5 standard errors at every time
    assert np.all(np.abs(results["mean"] - expected) <= 5 * sd + 1e-12)
    assert results["mean"][-1] < results["mean"][0]


def test_a_broken_entry_point_is_skipped(caplog):
    broken = metadata.EntryPoint(name="broken", value="no_such_package.manifest:DOMAIN",
                                 group=registry.ENTRY_POINT_GROUP)
    with installed(broken, DECAY_ENTRY_POINT):
        assert list(DOMAINS) == BUILT_IN + ["decay"]
    assert "broken" in caplog.text


def test_a_domain_name_is_registered_once():
    with pytest.raises(ValueError, match="already registered"):
        DOMAINS.register(Domain(name="ssa", label="again", module="app.sims.ssa", description=""))
    with pytest.raises(ValueError, match="plain identifier"):
        DOMAINS.register(Domain(name="no-dash", label="x", module="x", description=""))
