"""open3d, imported once, without the noise it makes in a notebook. Every worldlab module
that ray-casts takes it from here: `from ._open3d import open3d as o3d`.

Two things happen when open3d is imported inside a Jupyter kernel, and both used to show up
in every notebook that made an engine:

1. open3d prints "Jupyter environment detected. Enabling Open3D WebVisualizer." and switches
   to its WebRTC window system, whose C++ side logs "[Open3D INFO] WebRTC GUI backend
   enabled." and more. worldlab never opens an open3d window (it only ray-casts), so we set
   OPEN3D_DISABLE_WEB_VISUALIZER=true, the switch open3d's `__init__` reads for exactly this
   (unless the user set it).
2. `open3d.visualization` imports dash (for `draw_plotly`), and dash, when imported in a
   kernel, opens a comm with target "dash" to the front end. Neither JupyterLab (dash's lab
   extension is not built; ci/setup.sh keeps the build prompt away) nor papermill has a
   handler for it: papermill logs "No handler found for comm target 'dash'". While open3d
   imports dash here, `comm.create_comm` makes the `comm` package's own `DummyComm`, which
   sends nothing. dash's Jupyter integration (showing Dash apps inline) is then off in that
   kernel; nothing in worldlab uses dash, and a user who wants it imports dash before
   worldlab's engines (then this module leaves dash alone).
"""

from __future__ import annotations

import os
import sys
from contextlib import contextmanager

DISABLE_WEB_VISUALIZER = "OPEN3D_DISABLE_WEB_VISUALIZER"


@contextmanager
def _dash_comm_sends_nothing():
    """While open3d imports dash for the first time, its comm to the front end is a dummy."""
    try:
        import comm
    except ImportError:  # outside Jupyter's stack dash opens no comm anyway
        comm = None
    if comm is None or "dash" in sys.modules:
        yield
        return
    real = comm.create_comm
    comm.create_comm = comm.DummyComm
    try:
        yield
    finally:
        comm.create_comm = real


def _load():
    os.environ.setdefault(DISABLE_WEB_VISUALIZER, "true")
    with _dash_comm_sends_nothing():
        import open3d
    return open3d


open3d = _load()
