"""The recall protocol (evaluate/recall.py) on real procedural revisit walks: which frames
are recall frames, and what a world that answers with the truth (or repeats) scores."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from worldlab.cli import main
from worldlab.evaluate.recall import (MAX_WINDOW_COVER, recall_frames, recall_strip,
                                      recall_walks, reference_recall, timed_worlds,
                                      world_recall)
from worldlab.evaluate.revisit import MIN_GAP, MIN_OVERLAP, coverage
from worldlab.paths import DATA
from worldlab.pretrained import World

from oracle_worlds import OracleModel, tiny_autoencoder

F, WINDOW, SEED = 4, 12, 1_300_000


@pytest.fixture(scope="module")
def walks():
    return recall_walks(2, 64, WINDOW, F, "procedural", (), SEED)


def test_recall_frames_are_far_returns_the_window_cannot_show(walks):
    episodes, pairs, info = walks
    assert len(episodes) == 2 and info["seeds_tried"] == 2 + len(info["left_out"])
    for ep, found in zip(episodes, pairs):
        assert found == recall_frames(ep, WINDOW, F)
        for j, i, cov in found:
            assert j - i >= MIN_GAP and cov >= MIN_OVERLAP
            assert coverage(ep, j, [i])[0] == pytest.approx(cov)
            begin = j // F * F
            assert coverage(ep, j, range(begin - WINDOW, begin)).max() < MAX_WINDOW_COVER
    # a window as long as the gap would hold the outbound frame: refused
    with pytest.raises(ValueError, match="must reach past the window"):
        recall_frames(episodes[0], MIN_GAP, F)


def test_walks_that_never_return_are_refused_naming_the_seeds():
    with pytest.raises(ValueError, match=r"only 0 of seeds 1300000-1300001 gave a walk with "
                                         r"recall frames; wanted 1"):
        recall_walks(1, 16, WINDOW, F, "procedural", (), SEED, max_tries=2)


def test_a_world_that_answers_with_the_truth_scores_the_autoencoder(walks):
    episodes, pairs, _ = walks
    cfg, ae, latents = tiny_autoencoder(episodes, 64)
    truth = World(ae, OracleModel(latents, F, "truth"), cfg, torch.device("cpu"))
    refs = reference_recall(truth, episodes, pairs)
    scored = world_recall(truth, episodes, pairs, steps=2)
    np.testing.assert_allclose(scored["recall_psnr_per_walk"], refs["autoencoder"], atol=0.05)
    assert scored["memory_tokens_per_frame"] == 0 and scored["ms_per_chunk"] > 0
    assert scored["recall_psnr"] == pytest.approx(np.mean(scored["recall_psnr_per_walk"]))
    assert sorted(refs) == ["autoencoder", "copy", "oracle", "repeat_last", "warp_last"]
    assert all(len(v) == 2 and np.isfinite(v).all() for v in refs.values())


def test_worlds_are_timed_in_turns_on_the_same_walks(walks):
    episodes, pairs, _ = walks
    cfg, ae, latents = tiny_autoencoder(episodes, 64)
    worlds = {kind: World(ae, OracleModel(latents, F, kind), cfg, torch.device("cpu"))
              for kind in ("truth", "repeat")}
    before = torch.get_num_threads()
    timed = timed_worlds(worlds, episodes, pairs)
    assert list(timed) == ["truth", "repeat"] and all(ms > 0 for ms in timed.values())
    assert torch.get_num_threads() == before  # timed on one thread, then given back


def test_the_strip_shows_engine_worlds_and_oracle_at_the_widest_returns(walks):
    episodes, pairs, _ = walks
    cfg, ae, latents = tiny_autoencoder(episodes, 64)
    truth = World(ae, OracleModel(latents, F, "truth"), cfg, torch.device("cpu"))
    k = max(range(len(pairs)), key=lambda k: len(pairs[k]))  # the walk with most recall frames
    image, rows = recall_strip({"truth": truth}, episodes[k], pairs[k], rows=2)
    widest = sorted(pairs[k], key=lambda p: p[0] - p[1])[-2:]
    assert rows == sorted((j, i) for j, i, _ in widest) and len(rows) == min(2, len(pairs[k]))
    h, w = episodes[k].rgb.shape[1:3]
    n = len(rows)
    assert image.dtype == np.uint8 and image.shape == (n * (h + 2) - 2, 3 * w + 4, 3)
    assert (image[:h, :w] == episodes[k].rgb[rows[0][0]]).all()  # column 0: the engine
    with pytest.raises(ValueError, match="needs worlds and recall frames"):
        recall_strip({"truth": truth}, episodes[0], [])


def test_the_best_variant_is_chosen_on_validation_walks_when_given(tmp_path):
    import json

    from worldlab.evaluate.table_io import best_row as best_variant
    rows = lambda **v: {"variants": {n: {"recall_psnr": x} for n, x in v.items()},  # noqa: E731
                        "first_seed": 1_250_000, "walks": 8}
    reported = rows(none=18.0, retrieval=19.0, tokens=20.0, cache3d_oracle=25.0)
    assert best_variant(reported, "none") == {
        "name": "tokens", "chosen_on": "the reported walks (no validation table given)"}
    val = tmp_path / "validate.json"
    val.write_text(json.dumps({"engines": {"procedural": rows(none=18.0, retrieval=21.0,
                                                              tokens=20.0)}}))
    chosen = best_variant(reported, "none", val, "doom_heldout_map")  # its only block
    assert chosen["name"] == "retrieval" and "first seed 1250000, 8 walks" in chosen["chosen_on"]
    val.write_text(json.dumps({"engines": {"procedural": rows(none=1.0, sink=2.0)}}))
    with pytest.raises(ValueError, match="'sink', is not among this table's variants"):
        best_variant(reported, "none", val)


def test_eval_suite_recall_pairs_each_world_with_the_first_on_the_same_walks(tmp_path):
    """`eval --suite recall`: the shipped proc64 twice on one walk with recall frames
    (procedural walls that differ per segment by default), the second paired with the
    first walk by walk: the same world, the same seed, a difference of zero."""
    world = DATA / "checkpoints" / "proc64"
    assert main(["eval", "--suite", "recall", "--model", f"none={world}", "--model",
                 f"same={world}", "--episodes", "1", "--seed", str(SEED), "--threads", "1", "--out", str(tmp_path)]) == 0
    result = json.loads((tmp_path / "recall.json").read_text())
    b = result["engines"]["procedural"]
    assert result["reference"] == "none" and b["engine_options"] == {"walls": "segment"}
    assert b["walks"] == 1 and b["recall_frames"] > 0 and b["window_frames"] == 12
    assert b["variants"]["same"]["paired_vs_none"]["mean"] == pytest.approx(0.0, abs=1e-6)
    assert "paired_vs_none" not in b["variants"]["none"]
    assert sorted(b["references"]) == ["autoencoder", "copy", "oracle", "repeat_last",
                                       "warp_last"]
    assert result["episodes"]["seeds"][0] == SEED and result["walks"]["scored"] == 1
    with pytest.raises(SystemExit, match="--walls is a procedural option"):
        main(["eval", "--suite", "recall", "--checkpoint", str(DATA / "checkpoints" / "doom64"),
              "--walls", "segment", "--episodes", "1", "--out", str(tmp_path / "doom")])
    assert not (tmp_path / "doom").exists()
