"""The documentation site builds with warnings as errors (slow: not in the default run).

`pip install -e ".[docs]"` installs mkdocs, its material theme and mkdocstrings; without them the test skips.
"""

import os
import pathlib
import shutil
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_mkdocs_build_strict(tmp_path):
    pytest.importorskip("mkdocs")
    pytest.importorskip("material")
    pytest.importorskip("mkdocstrings_handlers.python")
    if not (ROOT / "mkdocs.yml").is_file():
        pytest.skip("no mkdocs.yml (not a source checkout)")
    site = tmp_path / "site"
    env = dict(os.environ, NO_MKDOCS_2_WARNING="1")
    proc = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-5000:]
    for page in ["index.html", "getting-started/index.html", "api/tpp/index.html", "guides/trees/index.html"]:
        assert (site / page).is_file(), page
    assert 'id="jaxcore.tpp.fit_mle"' in (site / "api/tpp/index.html").read_text()
    shutil.rmtree(site, ignore_errors=True)
