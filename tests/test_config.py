"""Configs: presets, overrides, loud failures."""

import pytest

import worldlab as wl
from worldlab.config import PRESETS, WorldConfig, make_config


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
