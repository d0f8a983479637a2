"""Every install path puts ``llmload-locust-help.pth`` into site-packages, so that
``locust -f LOCUSTFILE --help`` lists llmload's options after any of them."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

from tests.support.processes import ROOT


def _venv(path) -> tuple[str, str]:
    subprocess.run([sys.executable, "-m", "venv", str(path)], check=True, timeout=120)
    py = os.path.join(path, "bin", "python")
    site = subprocess.run([py, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    return py, site


def _pip(py: str, *args: str) -> None:
    # No dependencies (the hook's file is the question, not Locust); the build backend comes from the
    # package index as pyproject.toml asks, as in any user's install.
    res = subprocess.run([py, "-m", "pip", "install", "--quiet", "--no-deps", *args],
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stdout + res.stderr


@pytest.fixture
def source(tmp_path):
    """A copy of the project's packaging inputs (an editable install points into it)."""
    src = tmp_path / "src"
    src.mkdir()
    for name in ("pyproject.toml", "setup.py", "README.md", "llmload-locust-help.pth", "llmload_locust_help.py"):
        shutil.copy(os.path.join(ROOT, name), src / name)
    shutil.copytree(os.path.join(ROOT, "llmload"), src / "llmload",
                    ignore=shutil.ignore_patterns("__pycache__"))
    return src


@pytest.mark.parametrize("how", ["regular", "editable", "wheel"])
def test_the_help_hook_is_installed(tmp_path, source, how):
    py, site = _venv(tmp_path / "venv")
    if how == "regular":
        _pip(py, str(source))
    elif how == "editable":
        _pip(py, "-e", str(source))
    else:
        dist = tmp_path / "dist"
        res = subprocess.run([py, "-m", "pip", "wheel", "--quiet", "--no-deps", "-w",
                              str(dist), str(source)], capture_output=True, text=True, timeout=300)
        assert res.returncode == 0, res.stdout + res.stderr
        (wheel,) = dist.glob("llmload-*.whl")
        _pip(py, str(wheel))
    pth = os.path.join(site, "llmload-locust-help.pth")
    assert os.path.exists(pth), sorted(os.listdir(site))
    # the hook imports, and stays silent, in a process that is not `locust --help`
    res = subprocess.run([py, "-c", "import llmload_locust_help; print('ok')"], capture_output=True, text=True,
                         timeout=60, cwd=tmp_path)
    assert res.returncode == 0 and res.stdout.strip() == "ok", res.stderr
