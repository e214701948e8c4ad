"""Importing the engines in a Jupyter kernel prints nothing and opens no stray comm: open3d's
WebRTC banner and dash's comm (papermill: "No handler found for comm target 'dash'") used to
appear in every notebook that made an engine (see worldlab/engines/_open3d.py)."""

import io
import logging

import pytest


def run_cell(source: str) -> tuple[list, str]:
    """Execute one cell in a fresh `worldlab` kernel: (its outputs, the client's log)."""
    nbformat = pytest.importorskip("nbformat")
    from nbclient import NotebookClient

    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(source)])
    log = io.StringIO()
    client = NotebookClient(nb, kernel_name="worldlab", timeout=120)
    handler = logging.StreamHandler(log)
    client.log.addHandler(handler)
    try:
        client.execute()
    finally:
        client.log.removeHandler(handler)
    return nb.cells[0].outputs, log.getvalue()


def test_engines_import_quietly_in_a_kernel():
    outputs, log = run_cell("import worldlab.engines.procedural\n"
                            "import sys; assert 'dash' in sys.modules  # open3d imported it")
    assert outputs == [], outputs  # no "Open3D WebVisualizer" / "[Open3D INFO] WebRTC ..."
    assert "comm target" not in log, log
