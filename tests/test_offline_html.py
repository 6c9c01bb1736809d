"""A notebook downloaded as HTML from either lab loads nothing from the internet."""
from __future__ import annotations

import os
import re
import subprocess
import sys

from .conftest import ROOT

# What a page loads by itself (scripts, styles); a link the reader may click is not a load.
REMOTE = re.compile(r"""<(?:script|link|img)\b[^>]*\b(?:src|href)=["']https?://[^"']*""")


def test_html_export_has_no_remote_script(tmp_path):
    """Checks nbconvert with the labs' settings loads nothing from a CDN (MathJax, require.js),
    and that without them nbconvert would have (the test can fail)."""
    notebook = ROOT / "solutions" / "00_setup" / "setup.ipynb"
    template = "lab"  # JupyterLab's File > Download as HTML (classic's template has the same macro)
    pages = {}
    course = {"JUPYTER_PATH": str(ROOT / "jupyter" / "share"),
              "JUPYTER_CONFIG_PATH": str(ROOT / "jupyter" / "learner")}
    for name, extra in {"course": course, "stock": {}}.items():
        env = {key: value for key, value in os.environ.items() if key not in course}
        done = subprocess.run(
            [sys.executable, "-m", "jupyter", "nbconvert", "--to", "html", "--template",
             template, "--output-dir", str(tmp_path / name), str(notebook)],
            check=False, capture_output=True, text=True, env={**env, **extra}, timeout=120)
        assert done.returncode == 0, done.stderr
        pages[name] = (tmp_path / name / "setup.html").read_text()
    stock = REMOTE.findall(pages["stock"])
    assert any("mathjax" in url for url in stock) and any("require" in url for url in stock)
    assert not REMOTE.findall(pages["course"]), REMOTE.findall(pages["course"])[:3]
