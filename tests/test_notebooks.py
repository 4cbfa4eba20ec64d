"""Notebooks must keep working: run every code cell of each notebook in a project after `kedro run`."""

from __future__ import annotations

import os

import nbformat
import pytest

from tests.support.project import REPO_ROOT, kedro_cli, make_project_copy

NOTEBOOKS = sorted((REPO_ROOT / "notebooks").glob("*.ipynb"))


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    project = make_project_copy(tmp_path_factory.mktemp("notebook_project"))
    result = kedro_cli(project, "run")
    assert result.returncode == 0, result.stderr[-3000:]
    return project


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=[n.name for n in NOTEBOOKS])
def test_notebook_cells_run(notebook, project):
    cells = nbformat.read(notebook, as_version=4).cells
    namespace: dict = {}
    cwd = os.getcwd()
    os.chdir(project)
    try:
        for index, cell in enumerate(c for c in cells if c.cell_type == "code"):
            source = "\n".join(
                line for line in cell.source.splitlines() if not line.lstrip().startswith("%")
            )
            try:
                exec(compile(source, f"{notebook.name}[{index}]", "exec"), namespace)  # noqa: S102
            except Exception as exc:  # pragma: no cover - the message is what matters
                raise AssertionError(f"{notebook.name}, code cell {index} failed: {exc!r}") from exc
    finally:
        os.chdir(cwd)
