"""The shipped worlds under data/checkpoints/ (doom64 and proc64): each loads, says which
engine it was trained on, finds that engine's shipped probes with at least one character
kind they may score, and finds its shipped peer, which continues a real held-out walk of
that engine at the world's frame size (a peer retired from the tree is named with the command
that restores it). The shipped benchmark holds a row for each."""

from __future__ import annotations

import json

import numpy as np
import pytest

from worldlab.engines import engine_class
from worldlab.episodes import record_episode
from worldlab.evaluate.protocols import HELDOUT_SEED
from worldlab.evaluate.shipped import CHECKPOINTS, load_shipped_peer, load_shipped_probes
from worldlab.paths import DATA
from worldlab.pretrained import load_world
from worldlab.retired import RETIRED

pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py
SHIPPED = {"doom64": "doom", "proc64": "procedural"}


@pytest.mark.parametrize("name", sorted(SHIPPED))
def test_shipped_world_has_its_engine_probes_and_peer(name, capsys):
    world = load_world(CHECKPOINTS / name, device="cpu")
    engine = world.config.data.engine
    assert engine == SHIPPED[name]
    probes = load_shipped_probes(engine)
    assert any(probes.usable(k) for k in engine_class(engine).character_kinds)
    peer = load_shipped_peer(world)
    if f"peer_{name}" in RETIRED and peer is None:  # benchmark.json keeps its numbers
        assert f"checkpoints restore peer_{name}" in capsys.readouterr().out
        return
    assert peer is not None, f"no data/checkpoints/peer_{name}"
    f = world.chunk_frames
    ep = record_episode(engine, HELDOUT_SEED, 2 * f, world.size, "random_walk")
    out = peer.predict(ep, 0, f, 2 * f, seed=0)
    assert out.shape == (f, world.size, world.size, 3) and out.dtype == np.uint8
    assert out.std() > 0  # an image, not a constant


def test_shipped_benchmark_scores_every_shipped_world():
    bench = json.loads((DATA / "results" / "benchmark.json").read_text())
    assert set(bench["worlds"]) == set(SHIPPED)
    for name, result in bench["worlds"].items():
        assert result["engine"] == SHIPPED[name]
        assert result["checkpoint"].endswith(name)
        assert result["peer"].endswith(f"peer_{name}")


@pytest.mark.parametrize("name", sorted(SHIPPED))
def test_each_shipped_world_plays_with_its_cache_painting_on_request(name):
    """Each default world ships a depth head: `play --paint` plays it with its own 3D cache
    painting what it has seen, as worlds.json scores it; its config leaves it off."""
    from worldlab.camera import Action
    from worldlab.play.session import WorldSession

    assert load_world(CHECKPOINTS / name, device="cpu").config.sample.composite == "off"
    session = WorldSession.from_pretrained(CHECKPOINTS / name, "cpu", twin=False, paint=True)
    try:
        assert session.world.depth_head is not None
        assert session.world.config.memory.cache_points == 262_144  # what the tables score
        session.reset(engine=SHIPPED[name], seed=HELDOUT_SEED)
        for yaw in (15.0,) * 8 + (-15.0,) * 8:  # away and back: the cache paints the return
            session.step(Action(yaw=yaw))
        assert len(session.state.stream.points) > 0
    finally:
        session.close()
