"""`python -m worldlab table ...`: each sub-command's arguments, and the tables built end to end
from evaluation outputs in the shape the eval suite writes (the shipped tables' own inputs,
split back into the files the suite wrote), without provenance and without absolute paths."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from worldlab.cli import build_parser, main, run
from worldlab.evaluate.table_io import TABLES, beside
from worldlab.paths import DATA

RESULTS = DATA / "results"
PROVENANCE = {"command", "commit", "uncommitted_changes", "measured", "arguments"}


def parse(*argv: str):
    return build_parser("table").parse_args(["table", *argv])


def strings(value):
    """Every string in a JSON value."""
    if isinstance(value, dict):
        return [s for v in value.values() for s in strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in strings(v)]
    return [value] if isinstance(value, str) else []


def write(path: Path, data: dict) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data))
    return path


def revisit_outputs(tmp_path: Path) -> tuple[dict, list[Path]]:
    """The shipped memory table's revisit scores as the two `eval --suite revisit` outputs
    of the same walks they were merged from (the seed runs apart from the rest)."""
    shipped = json.loads((RESULTS / "memory.json").read_text())
    suite = {k: v for k, v in shipped.items() if k not in PROVENANCE | {
        "best", "bars", "budget", "note", "validation", "cost_baseline", "costs_from"}}
    seeds = {k: v for k, v in suite["variants"].items() if "_seed" in k}
    first = {**suite, "variants": {k: v for k, v in suite["variants"].items() if k not in seeds}}
    return shipped, [write(tmp_path / "eval_a" / "revisit.json", first),
                     write(tmp_path / "eval_b" / "revisit.json", {**suite, "variants": seeds})]


# ----------------------------------------------------------------------------------------
# Arguments
# ----------------------------------------------------------------------------------------


def test_every_table_parses_the_arguments_its_script_took():
    a = parse("worlds", "--old", "o", "--new", "n", "--parts", "world,strip", "--strip-also",
              "x=runs/x", "--strip", "w.png", "--threads", "1")
    assert (a.table, a.old, a.parts, a.strip, a.out) == ("worlds", "o", "world,strip", "w.png",
                                                         None)
    a = parse("worlds", "--autoencoders", "a=resample:4", "--ae-strip", "ae.png",
              "--ae-strip-rows", "a", "--cache", "c", "--out", "runs/t/ae.json")
    assert (a.autoencoders, a.ae_strip, a.out) == ("a=resample:4", "ae.png",
                                                   Path("runs/t/ae.json"))
    a = parse("memory", "--report", "r1.json", "r2.json", "--validation", "v.json", "--best",
              "retrieval", "--costs", "c.json", "--budget", "300 steps", "--strip", "none",
              "retrieval", "--steps", "4")
    assert (a.report, a.best, a.costs, a.strip, a.worlds) == (
        [Path("r1.json"), Path("r2.json")], "retrieval", Path("c.json"),
        ["none", "retrieval"], "runs/memory/worlds")
    a = parse("long-horizon", "--report", "l.json", "--validation", "v1.json", "v2.json",
              "--quick", "q/a/quick.json", "--best", "self_rollout", "--note", "n")
    assert (a.validation, a.quick, a.best, a.worlds) == (
        [Path("v1.json"), Path("v2.json")], [Path("q/a/quick.json")], "self_rollout",
        "runs/long/worlds")
    a = parse("fast-decoder", "--fast", "runs/fd/model", "--chunks", "5", "--episodes", "2")
    assert (a.fast, a.chunks, a.episodes, a.world) == ("runs/fd/model", 5, 2,
                                                       "data/checkpoints/doom64_teacher")
    with pytest.raises(SystemExit):
        parse("memory", "--best", "x")  # --report is required
    with pytest.raises(SystemExit):
        parse("nonsense")


def test_strips_go_beside_the_json():
    assert beside(TABLES / "memory.json", "memory_strip.png") == TABLES / "memory_strip.png"
    with pytest.raises(ValueError, match="give a file name"):
        beside(TABLES / "memory.json", "data/results/x.png")


# ----------------------------------------------------------------------------------------
# End to end
# ----------------------------------------------------------------------------------------


def test_memory_table_from_revisit_outputs(tmp_path):
    shipped, reports = revisit_outputs(tmp_path)
    out = tmp_path / "tables" / "memory.json"
    assert main(["table", "memory", "--report", *map(str, reports), "--validation",
                 str(reports[0]), "--best", "retrieval", "--costs",
                 str(RESULTS / "memory_cost.json"), "--budget", "300 steps",
                 "--out", str(out)]) == 0
    table = json.loads(out.read_text())
    assert not PROVENANCE & set(table)  # the ship stage adds it
    assert not [s for s in strings(table) if s.startswith("/")]  # paths relative to the repo
    assert table["costs_from"] == "data/results/memory_cost.json"
    assert set(table["variants"]) == set(shipped["variants"])
    # the same inputs give the shipped numbers
    assert table["bars"] == pytest.approx(shipped["bars"])
    assert table["seeds"]["retrieval"]["return_psnr"]["mean"] == pytest.approx(
        shipped["seeds"]["retrieval"]["return_psnr"]["mean"])
    paired = table["best_minus_none"]["return_psnr"]  # walk by walk, seeds averaged
    assert paired["n"] == 8 and paired["lo"] < paired["mean"] < paired["hi"]
    assert set(table["validation"]["variants"]) < set(table["variants"])


def test_long_horizon_table_from_long_outputs(tmp_path):
    shipped = json.loads((RESULTS / "long_horizon_random_walks.json").read_text())
    methods, episodes = shipped["methods"], shipped["episodes"]
    a = {k: v for k, v in methods.items() if "_seed" not in k}
    reports = [write(tmp_path / "report_a" / "long.json", {"methods": a, "episodes": episodes}),
               write(tmp_path / "report_b" / "long.json", {
                   "methods": {k: v for k, v in methods.items() if k not in a},
                   "episodes": episodes})]
    quick = {"next_chunk_psnr": 19.5, "rollout_psnr_mean": 16.2, "sampling_steps": 8,
             "baseline_repeat_psnr": 17.0}
    q = write(tmp_path / "quick" / "self_rollout" / "quick.json", quick)
    out = tmp_path / "tables" / "long_horizon.json"
    assert main(["table", "long-horizon", "--report", *map(str, reports), "--best",
                 "self_rollout", "--quick", str(q), "--out", str(out)]) == 0
    table = json.loads(out.read_text())
    assert not PROVENANCE & set(table)
    assert table["quick_next_chunk"] == {"self_rollout": {"next_chunk_psnr": 19.5,
                                                          "rollout_psnr_mean": 16.2,
                                                          "sampling_steps": 8}}
    pooled = table["seeds"]["self_rollout"]["psnr_late"]
    assert pooled["mean"] == pytest.approx(shipped["seeds"]["self_rollout"]["psnr_late"]["mean"])
    assert pooled["walks"]["n"] == episodes["count"]


def test_autoencoder_table_from_cached_rows(tmp_path):
    """`table worlds --autoencoders` reads each part from --cache when it is there (here:
    the resampling references, cached), so the table, its seed summary and its paths are
    checked without an engine."""
    cache = tmp_path / "cache"
    for factor, psnr in ((4, 30.5), (2, 31.5)):
        scores = {"psnr": psnr, "ssim": 0.8, "sharpness_ratio": 0.75, "colour_distance": 0.05}
        write(cache / "autoencoder" / f"resample:{factor}.json",
              {**scores, "heldout_map": {**scores, "psnr": psnr - 1.0}})
    out = tmp_path / "tables" / "autoencoders.json"
    assert main(["table", "worlds", "--autoencoders", "bi=resample:4,bi_seed1=resample:2",
                 "--cache", str(cache), "--threads", "1", "--out", str(out)]) == 0
    table = json.loads(out.read_text())
    assert not PROVENANCE & set(table)
    assert table["rows"]["bi"]["downsample"] == 4 and table["rows"]["bi"]["psnr"] == 30.5
    assert table["seeds"]["bi"]["psnr"]["mean"] == 31.0
    assert table["seeds"]["bi"]["mean_clears_bars"]


# ----------------------------------------------------------------------------------------
# Bad input
# ----------------------------------------------------------------------------------------


def test_bad_inputs_name_the_path_and_what_was_expected(tmp_path, capsys):
    missing = tmp_path / "nowhere" / "revisit.json"
    with pytest.raises(FileNotFoundError, match="nowhere/revisit.json.*eval --suite revisit"):
        main(["table", "memory", "--report", str(missing), "--best", "none"])
    wrong = write(tmp_path / "long.json", {"methods": {}})
    with pytest.raises(ValueError, match=r"long.json is not an `eval --suite long` output.*"
                                         r"lacks \['episodes'\]"):
        main(["table", "long-horizon", "--report", str(wrong), "--best", "x"])
    listed = tmp_path / "list.json"
    listed.write_text("[1, 2]")
    with pytest.raises(ValueError, match="holds a JSON list"):
        main(["table", "long-horizon", "--report", str(listed), "--best", "x"])
    _, reports = revisit_outputs(tmp_path)
    with pytest.raises(ValueError, match="--best 'nonesuch' is not a variant"):
        main(["table", "memory", "--report", str(reports[0]), "--best", "nonesuch"])
    other = json.loads(reports[1].read_text())
    other["episodes"]["seeds"] = [1]
    write(reports[1], other)
    with pytest.raises(ValueError, match="scored other walks"):
        main(["table", "memory", "--report", *map(str, reports), "--best", "retrieval"])
    assert run(["table", "memory", "--report", str(missing), "--best", "none"]) == 2
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith("python -m worldlab: error: ") and str(missing) in err[0]


def _next_chunk_scores(model: list[float], warp: list[float]) -> dict:
    """What `protocols.next_chunk` gives per map set, for per-walk values."""
    return {"next_chunk_psnr_per_episode": model, "baseline_warp_psnr_per_episode": warp,
            "baseline_repeat_psnr_per_episode": [w - 2.0 for w in warp],
            "autoencoder_psnr_per_episode": [w + 5.0 for w in warp],
            "next_chunk_short_episodes": 0, "next_chunk_context_frames": 12,
            "next_chunk_samples": 4 * len(model)}


def test_geometry_table_pairs_each_seed_with_the_reference_of_that_seed(tmp_path):
    from worldlab.evaluate.geometry_table import _block
    from worldlab.evaluate.table_io import parse_models

    warp = [20.0, 21.0, 22.0]
    per_walk = {"none": [20.0, 21.0, 22.0], "none_seed1": [21.0, 22.0, 23.0],
                "geo": [21.0, 22.0, 23.0], "geo_seed1": [23.0, 24.0, 25.0]}
    scores = {n: {"training_maps": _next_chunk_scores(v, warp)} for n, v in per_walk.items()}
    block = _block(scores, "training_maps", "none")
    geo, none = block["variants"]["geo"], block["variants"]["none"]
    assert geo["next_chunk_psnr"] == pytest.approx(23.0) and geo["seeds"] == 2
    assert geo["per_seed"] == {"geo": 22.0, "geo_seed1": 24.0}
    # geo - none is 1 dB at seed 0 and 2 dB at seed 1, on every walk: 1.5 dB, no spread
    assert geo["paired_vs_none"]["mean"] == pytest.approx(1.5)
    assert geo["paired_vs_none"]["lo"] == pytest.approx(1.5)
    assert geo["vs_warp_last"]["mean"] == pytest.approx(2.0)
    assert "paired_vs_none" not in none and none["vs_warp_last"]["mean"] == pytest.approx(0.5)
    assert block["baselines"]["warp_last"]["mean"] == pytest.approx(21.0)
    assert block["baselines"]["autoencoder"]["mean"] == pytest.approx(26.0)
    assert block["walks"] == 3 and block["context_frames"] == 12
    from worldlab.evaluate.geometry_table import paired_rows
    table = {"reference": "none", "training_maps": block, "heldout_map": block}
    rows = paired_rows(table)
    assert rows["training_maps: geo - none"] == geo["paired_vs_none"]
    assert rows["heldout_map: none - warp-last"] == none["vs_warp_last"]
    assert "training_maps: none - none" not in rows and len(rows) == 6
    with pytest.raises(ValueError, match="geo's seeds need none's of the same seed.*none_seed1"):
        _block({k: v for k, v in scores.items() if k != "none_seed1"}, "training_maps", "none")
    with pytest.raises(ValueError, match="--model takes NAME=DIR, got 'geo'"):
        parse_models(["geo"])
    with pytest.raises(ValueError, match="--model 'geo' is given twice"):
        parse_models(["geo=a", "geo=b"])
    with pytest.raises(ValueError, match="--reference 'nope' is not a --model"):
        main(["table", "geometry", "--model", "geo=a", "--reference", "nope"])
    with pytest.raises(ValueError, match="--seed must be a held-out seed"):
        main(["table", "geometry", "--model", "geo=a", "--reference", "geo", "--seed", "5"])


def test_worlds_scored_one_job_each_make_the_same_recall_table(tmp_path):
    """`table recall --score-only` per world (how a spec spreads scoring over jobs), then the
    table itself, which scores nothing again (the cache holds every world and the
    references) and times the variants in turns on the same walks, into the cache too."""
    world = str(DATA / "checkpoints" / "proc64")
    common = ["--reference", "none", "--engine", "procedural", "--walls", "segment",
              "--walks", "1", "--frames", "96", "--seed", "1250000", "--threads", "1",
              "--cache", str(tmp_path / "cache")]
    for name in ("retrieval", "none"):
        assert main(["table", "recall", "--model", f"{name}={world}", "--score-only",
                     *common, "--out", str(tmp_path / f"{name}.json")]) == 0
    cached = sorted(p.name for p in (tmp_path / "cache").iterdir())
    assert len(cached) == 3 and sum(p.startswith("references-") for p in cached) == 1
    assert main(["table", "recall", "--model", f"none={world}", "--model",
                 f"retrieval={world}", *common, "--strip", "--out", str(tmp_path / "t.json")
                 ]) == 0
    timing = sorted(set(p.name for p in (tmp_path / "cache").iterdir()) - set(cached))
    assert len(timing) == 1 and timing[0].startswith("timing-")
    timed = json.loads((tmp_path / "cache" / timing[0]).read_text())
    table = json.loads((tmp_path / "t.json").read_text())["engines"]["doom_heldout_map"]
    alone = json.loads((tmp_path / "retrieval.json").read_text())
    assert alone["scored_only"] and table["variants"]["retrieval"]["recall_psnr"] == \
        alone["scores"]["retrieval"]["recall_psnr"]
    assert table["variants"]["retrieval"]["paired_vs_none"]["mean"] == 0.0  # the same world
    assert table["timed_walks"] == 1 and sorted(timed) == ["none", "retrieval"]
    assert all(table["variants"][n]["ms_per_chunk"] == timed[n] > 0 for n in timed)
    assert table["best"]["name"] == "retrieval" and table["strip"]["columns"] == [
        "engine", "none", "retrieval", "oracle"]
    assert (tmp_path / table["strip"]["file"]).is_file() and table["strip"]["file"] == \
        "t_strip.png"


def test_a_bad_run_of_the_recall_table_is_named_before_anything_is_measured(tmp_path):
    world = str(DATA / "checkpoints" / "proc64")
    args = ["table", "recall", "--model", f"none={world}", "--reference", "none",
            "--walks", "1", "--cache", str(tmp_path / "cache"), "--out", str(tmp_path / "t.json")]
    with pytest.raises(ValueError, match="--run takes NAME=DIR, got 'none'"):
        main([*args, "--run", "none"])
    with pytest.raises(FileNotFoundError, match="proc64/tensorboard: no TensorBoard events"):
        main([*args, "--run", f"none={world}"])
    assert not (tmp_path / "cache").exists() and not (tmp_path / "t.json").exists()


def test_a_cached_score_is_keyed_by_what_the_world_holds_not_its_path_alone(tmp_path):
    """A world made anew at the same path (a spec's package stage run again) is measured
    again: the key holds a digest of its files; the same files give the same key."""
    from worldlab.evaluate.table_io import cache_key

    world = tmp_path / "worlds" / "proc64"
    (world / "world").mkdir(parents=True)
    (world / "world_config.json").write_text("{}")
    (world / "world" / "weights.safetensors").write_bytes(b"one")
    first = cache_key(world, 32, 1100000)
    assert cache_key(world, 32, 1100000) == first
    assert cache_key(world, 16, 1100000) != first
    (world / "world" / "weights.safetensors").write_bytes(b"two")
    assert cache_key(world, 32, 1100000) != first
    assert cache_key(tmp_path / "not_a_world", 32) == cache_key(tmp_path / "not_a_world", 32)
