"""core.provenance: the package versions recorded with every train run and benchmark result."""

from __future__ import annotations

import platform
from importlib import metadata

import torch

from mera_pipelines.core.provenance import RESULT_PACKAGES, cpu_description, package_versions


def test_installed_packages_give_their_version_and_missing_ones_none():
    versions = package_versions(("pytest", "no-such-package-mera"))
    assert versions == {"pytest": metadata.version("pytest"), "no-such-package-mera": None}


def test_the_default_list_covers_what_decides_a_trained_planner():
    versions = package_versions()
    assert set(versions) == set(RESULT_PACKAGES)
    for name in ("torch", "transformers", "trl", "lancedb", "sentence-transformers"):
        assert versions[name] == metadata.version(name)


def test_cpu_model_from_cpuinfo_and_the_kernels_torch_uses(tmp_path):
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("processor\t: 0\nmodel name\t: AMD EPYC 7B13\nflags\t\t: avx2\n")
    cpu = cpu_description(cpuinfo)
    assert cpu == {"model": "AMD EPYC 7B13", "capability": torch.backends.cpu.get_cpu_capability()}
    assert cpu["capability"]  # e.g. "AVX2": which kernels, so which last digits


def test_without_cpuinfo_the_model_comes_from_the_platform(tmp_path):
    assert cpu_description(tmp_path / "missing")["model"] == (platform.processor() or None)
