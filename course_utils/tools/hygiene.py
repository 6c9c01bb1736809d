"""Keep committed notebooks clean: no outputs, no execution counts, no volatile metadata."""
from __future__ import annotations

from pathlib import Path

import nbformat

# The kernel `make install` registers in the course's environment: a notebook opened in the
# course's lab starts the course's Python, not whichever "python3" Jupyter finds first.
KERNEL_NAME = "gpu-course"
KERNELSPEC = {"display_name": "Python (GPU course)", "language": "python", "name": KERNEL_NAME}
NOTEBOOK_METADATA_KEYS = {"kernelspec", "language_info"}
CELL_METADATA_KEYS = {"nbgrader", "tags", "editable", "deletable"}


def clean_notebook(nb: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """Strip outputs and volatile metadata in place; return the notebook."""
    nb.metadata = nbformat.from_dict({
        "kernelspec": dict(KERNELSPEC),
        "language_info": {"name": "python"},
    })
    for cell in nb.cells:
        cell.metadata = nbformat.from_dict(
            {key: value for key, value in cell.metadata.items() if key in CELL_METADATA_KEYS})
        if cell.cell_type == "code":
            cell.outputs = []
            cell.execution_count = None
        if "attachments" in cell and not cell.attachments:
            del cell["attachments"]
    return nb


def problems(nb: nbformat.NotebookNode) -> list[str]:
    """Every way the notebook is not clean, in words; [] when it is clean."""
    found = []
    extra = set(nb.metadata) - NOTEBOOK_METADATA_KEYS
    if extra:
        found.append(f"notebook metadata has volatile keys {sorted(extra)}")
    if nb.metadata.get("language_info", {}) != {"name": "python"}:
        found.append("language_info holds more than the language name (a Python version)")
    for index, cell in enumerate(nb.cells):
        if cell.cell_type == "code":
            if cell.outputs:
                found.append(f"cell {index} has outputs")
            if cell.execution_count is not None:
                found.append(f"cell {index} has an execution count")
        volatile = set(cell.metadata) - CELL_METADATA_KEYS
        if volatile:
            found.append(f"cell {index} has volatile metadata {sorted(volatile)}")
    return found


def clean_file(path: Path) -> bool:
    """Clean one notebook file; return True when it changed."""
    nb = nbformat.read(path, as_version=4)
    before = nbformat.writes(nb)
    after = nbformat.writes(clean_notebook(nb))
    if after != before:
        Path(path).write_text(after + ("" if after.endswith("\n") else "\n"), encoding="utf-8")
        return True
    return False
