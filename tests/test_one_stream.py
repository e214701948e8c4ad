"""One chunk maker: at run time (play, every evaluation protocol, the notebooks) chunks are
made only by `memory.stream.Stream`; the sampler keeps the math it calls, and training's own
rollouts. Every call in `worldlab/` is read with `ast`: a call of the sampler's one-chunk
function, of its generated-chunk append or of the model's chunk append anywhere else fails
here, naming the file and line (STYLE.md habit 14: one idea, one place)."""

from __future__ import annotations

import ast
from pathlib import Path

import numpy as np
import pytest

pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py
PACKAGE = Path(__file__).resolve().parents[1] / "worldlab"
CHUNK_MAKERS = ("sample_chunk", "append_generated", "append_chunk")
# the files that may call them: the sampler and the model (the math), the stream (the one
# run-time maker) and training, which makes its own rollouts with gradient or a teacher
ALLOWED = ("model/", "memory/stream.py", "train/")


def calls_of(path: Path, names: tuple[str, ...]) -> list[tuple[str, int]]:
    """(name, line) of every call `f(...)` or `x.f(...)` with f in `names` in a file, and
    ("import f", line) of every `from ... import f` (an alias would hide the call)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom):
            found += [(f"import {a.name}", node.lineno) for a in node.names if a.name in names]
        if isinstance(node, ast.Call):
            f = node.func
            name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(
                f, ast.Attribute) else None
            if name in names:
                found.append((name, node.lineno))
    return found


def test_chunks_are_made_only_by_the_stream_and_the_sampler():
    stray = [f"{path.relative_to(PACKAGE)}:{line} calls {name}"
             for path in sorted(PACKAGE.rglob("*.py"))
             if not str(path.relative_to(PACKAGE)).startswith(ALLOWED)
             for name, line in calls_of(path, CHUNK_MAKERS)]
    assert not stray, ("make chunks with memory.stream.Stream (append_truth, generate, "
                       "append, step), not by hand: " + "; ".join(stray))


def test_the_scan_sees_calls_in_every_spelling(tmp_path):
    src = tmp_path / "m.py"
    src.write_text("from x import sample_chunk as s\nsample_chunk(1)\n"
                   "model.append_chunk(x, cache)\nsampler.append_generated(m, c, x)\n"
                   "def sample_chunk_free(): pass\n")
    assert sorted(calls_of(src, CHUNK_MAKERS), key=lambda c: c[1]) == [
        ("import sample_chunk", 1), ("sample_chunk", 2), ("append_chunk", 3),
        ("append_generated", 4)]


def test_the_stream_and_the_sampler_do_call_them():
    """The allowed makers exist where the scan expects them (a rename would otherwise make
    the first test pass on nothing)."""
    for path in (PACKAGE / "memory" / "stream.py", PACKAGE / "model" / "sampler.py"):
        called = {n for n, _ in calls_of(path, CHUNK_MAKERS) if not n.startswith("import ")}
        assert called == set(CHUNK_MAKERS), path


@pytest.mark.parametrize("context_noise", [0.0, 0.1])
def test_the_plain_stream_makes_the_samplers_rollout_bit_for_bit(world, context_noise):
    """`generation.generate` streams on a Stream with memory off; the sampler's rollout (the
    math, kept for training) must give the very same frames, noised context included."""
    import dataclasses

    import torch

    from worldlab.evaluate.generation import episode_conditions, generate
    from worldlab.model.sampler import rollout

    from oracle_worlds import straight_walk

    rgb = np.random.default_rng(0).integers(0, 256, (16, 32, 32, 3), dtype=np.uint8)
    ep = straight_walk(rgb, 0, 0.2)
    sample = dataclasses.replace(world.config.sample, context_noise=context_noise)
    w = dataclasses.replace(world, config=dataclasses.replace(world.config, sample=sample))
    f = w.chunk_frames
    got = generate(w, ep, 0, f, 4 * f, steps=2, seed=5)
    lat = rollout(w.model, w.encode(ep.rgb[:f]), *episode_conditions(w, ep, 0, 4 * f), steps=2,
                  solver=sample.solver, guidance=sample.guidance, context_noise=context_noise,
                  generator=torch.Generator().manual_seed(5))
    assert got.shape == (3 * f, 32, 32, 3)
    assert np.array_equal(got, w.decode(lat[:, f:]))
    with pytest.raises(ValueError, match="multiples of chunk_frames"):
        generate(w, ep, 0, f + 1, 4 * f)
