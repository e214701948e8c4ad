"""Configs: presets, overrides, loud failures."""

import json

import pytest

import worldlab as wl
from worldlab.config import PRESETS, WORLD_RECIPES, WorldConfig, make_config, recipe_config


@pytest.mark.parametrize("preset", PRESETS)
def test_every_preset_builds_and_round_trips(preset):
    cfg = make_config(preset)
    assert cfg.preset == preset
    assert WorldConfig.from_dict(cfg.to_dict()) == cfg


def test_presets_grow_in_size():
    widths = [make_config(p).model.width for p in PRESETS]
    assert widths == sorted(widths) and len(set(widths)) == len(widths)


def test_overrides_both_spellings():
    assert make_config("tiny", model__width=48).model.width == 48
    cfg = make_config("tiny", train={"steps": 7, "lr": 1e-3})
    assert (cfg.train.steps, cfg.train.lr) == (7, 1e-3)
    # untouched fields keep the preset's value
    assert cfg.train.batch_size == make_config("tiny").train.batch_size


def test_unknown_keys_are_named():
    with pytest.raises(ValueError, match="'widht'"):
        make_config("tiny", model__widht=3)
    with pytest.raises(ValueError, match="'modle__width'"):
        make_config("tiny", modle__width=3)
    with pytest.raises(ValueError, match="'huge'"):
        make_config("huge")
    with pytest.raises(ValueError, match="needs a dict"):
        make_config("tiny", model=3)


def test_top_level_surface():
    assert wl.make_config is make_config
    assert (wl.ROOT / "pyproject.toml").exists()


@pytest.mark.parametrize("name", sorted(WORLD_RECIPES))
def test_every_recipe_builds_a_valid_config(name):
    preset, values = WORLD_RECIPES[name]
    cfg = recipe_config(name)
    assert cfg.preset == preset
    assert WorldConfig.from_dict(json.loads(cfg.to_json())) == cfg
    for key, value in values.items():
        section, _, field = key.partition("__")
        assert getattr(getattr(cfg, section), field) == value, key


def test_level_world_recipe_is_doom64_teachers():
    cfg = recipe_config("level_world", train__lr=1e-4)  # overrides apply on top
    assert (cfg.model.patch_size, cfg.model.width, cfg.model.depth) == (2, 192, 4)
    assert (cfg.model.window_chunks, cfg.data.clip_chunks, cfg.sample.steps) == (3, 4, 16)
    assert (cfg.train.batch_size, cfg.train.forcing, cfg.train.ema_decay) == (32, "teacher",
                                                                              0.995)
    assert (cfg.train.lr, cfg.train.warmup_steps) == (1e-4, 50)


def test_recipe_errors_name_the_bad_value(monkeypatch):
    with pytest.raises(ValueError, match="unknown recipe 'level_wrold'.*level_world"):
        recipe_config("level_wrold")
    monkeypatch.setitem(WORLD_RECIPES, "broken", ("small", {"model__widht": 3}))
    with pytest.raises(ValueError, match="recipe 'broken'.*widht"):
        recipe_config("broken")


def test_train_world_cli_applies_the_recipe_then_set():
    from worldlab.cli import build_parser
    from worldlab.train.cli import _config

    args = build_parser("train").parse_args(
        ["train", "world", "--recipe", "level_world", "--data", "d", "--out", "o",
         "--set", "model__depth=2", "--batch-size", "8"])
    cfg = _config(args)
    assert (cfg.model.width, cfg.model.depth, cfg.train.batch_size) == (192, 2, 8)
    with pytest.raises(ValueError, match="drop --preset tiny"):
        _config(build_parser("train").parse_args(["train", "world", "--recipe", "level_world",
                                           "--preset", "tiny", "--data", "d", "--out", "o"]))
    with pytest.raises(SystemExit):  # argparse names the choices
        build_parser("train").parse_args(["train", "world", "--recipe", "nope", "--data", "d",
                                   "--out", "o"])
