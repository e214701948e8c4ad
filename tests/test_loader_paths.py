"""Every loader finds a directory by one rule (absolute as it is; relative from the current
directory, else from the repository root) and never reaches for a model hub: a missing or
misspelt directory is an error naming where it looked and what makes it."""

import re

import pytest
import torch

from worldlab.config import make_config
from worldlab.model.autoencoder import VideoAutoencoder
from worldlab.paths import ROOT, RUNS
from worldlab.pretrained import (DEFAULT_WORLD, find_dir, load_autoencoder, load_world,
                                 resolve_checkpoint)

pytestmark = pytest.mark.usefixtures("one_thread")
SHIPPED = str(DEFAULT_WORLD)  # "data/checkpoints/doom64", as the notebooks spell it


def test_a_repository_path_works_from_a_subfolder(monkeypatch):
    monkeypatch.chdir(ROOT / "notebooks")
    assert resolve_checkpoint(SHIPPED) == ROOT / DEFAULT_WORLD
    world = load_world(SHIPPED, device="cpu")
    assert world.path == ROOT / DEFAULT_WORLD and world.size == 64
    ae = load_autoencoder(f"{SHIPPED}/autoencoder")
    assert not ae.training and next(ae.parameters()).dtype == torch.float32
    assert ae.config == world.ae.config


def test_a_misspelt_world_names_where_it_looked_and_its_neighbours(monkeypatch):
    monkeypatch.chdir(ROOT / "notebooks")
    for load in (resolve_checkpoint, lambda p: load_world(p, device="cpu")):
        with pytest.raises(FileNotFoundError) as err:
            load("data/checkpoints/doom46")
        msg = str(err.value)
        assert str(ROOT / "notebooks" / "data/checkpoints/doom46") in msg  # the cwd
        assert str(ROOT / "data/checkpoints/doom46") in msg  # the repository root
        assert "doom64" in msg.split("holds")[1] and "data/README.md" in msg
        assert "autoencoder is missing" not in msg


def test_an_absolute_path_is_looked_for_once(tmp_path):
    with pytest.raises(FileNotFoundError) as err:
        load_world(tmp_path / "nope", device="cpu")
    assert re.search(rf"looked in {re.escape(str(tmp_path / 'nope'))}\. ", str(err.value))
    assert f"{tmp_path} holds" not in str(err.value)  # tmp_path is empty: nothing to list


def test_a_missing_run_output_names_what_makes_it(monkeypatch):
    monkeypatch.chdir(ROOT / "notebooks")
    missing = "no_such_notebook_output/model"
    with pytest.raises(FileNotFoundError, match="run the notebook or command that makes it"):
        load_autoencoder(RUNS / missing)
    with pytest.raises(FileNotFoundError) as err:
        load_autoencoder(RUNS / missing, made_by="run notebooks/02_autoencoder.ipynb first")
    assert str(RUNS / missing) in str(err.value)
    assert str(err.value).endswith("run notebooks/02_autoencoder.ipynb first")


def test_the_current_directory_comes_first(tmp_path, monkeypatch):
    torch.manual_seed(0)
    ae = VideoAutoencoder.from_config_dataclass(make_config("tiny").autoencoder)
    ae.save_pretrained(tmp_path / "data" / "checkpoints" / "doom64" / "autoencoder")
    monkeypatch.chdir(tmp_path)  # a relative path that exists here shadows the root's
    found = find_dir(f"{SHIPPED}/autoencoder", "autoencoder")
    assert found == DEFAULT_WORLD / "autoencoder" and found.resolve() == \
        (tmp_path / DEFAULT_WORLD / "autoencoder").resolve()
    here = load_autoencoder(f"{SHIPPED}/autoencoder")
    assert list(here.config.block_out_channels) == [8, 16, 16, 16]  # the tiny one, not doom64's
    assert all(torch.equal(a, b) for a, b in zip(here.state_dict().values(),
                                                 ae.state_dict().values()))


def test_a_directory_that_is_not_an_autoencoder(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match=r"is not an autoencoder directory: config\.json"):
        load_autoencoder(tmp_path / "empty")
    assert list((tmp_path / "empty").iterdir()) == []  # nothing written


HUB_CALL = re.compile(r"\b(VideoAutoencoder|WorldModel|FastDecoder|DepthHead|DiamondUNet)"
                      r"\.from_pretrained\(")


def test_no_notebook_or_module_loads_through_a_model_hub():
    """diffusers' from_pretrained takes a missing directory for a hub id and goes online;
    notebooks and the package load through worldlab.loading (load_module, load_world,
    load_autoencoder) instead."""
    files = [*ROOT.glob("notebooks/*.ipynb"), *ROOT.glob("tutorials/*.ipynb"),
             *ROOT.glob("worldlab/**/*.py"), *ROOT.glob("examples/**/*.py")]
    offenders = [str(p.relative_to(ROOT)) for p in files if HUB_CALL.search(p.read_text())]
    assert files and not offenders, offenders
