"""`python -m worldlab train encode`: a store's latent cache filled by one command (what the
scripts' `python -c ... fill_latents` one-liners did), and a second run encodes nothing."""

import pytest
import torch

from synthetic_episodes import synthetic_store
from worldlab.cli import main
from worldlab.config import make_config
from worldlab.episodes import LatentCache
from worldlab.model.autoencoder import VideoAutoencoder, frames_to_tensor

pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py


@pytest.fixture
def store_and_autoencoder(tmp_path):
    store = synthetic_store(tmp_path / "store", episodes=2, t=8, size=32)
    torch.manual_seed(0)
    ae = VideoAutoencoder.from_config_dataclass(make_config("tiny").autoencoder).eval()
    ae.save_pretrained(tmp_path / "ae")
    return store, ae, tmp_path / "ae"


def test_encode_fills_the_cache_once(store_and_autoencoder, capsys):
    store, ae, ae_dir = store_and_autoencoder
    assert main(["train", "encode", "--data", str(store.root), "--autoencoder",
                 str(ae_dir)]) == 0
    assert capsys.readouterr().out.startswith("encoded 2 episodes into")
    cache = LatentCache(store.root / "latents")
    assert all(cache.has(i) for i in store.ids())
    first = store.ids()[0]
    with torch.no_grad():  # the cache holds this autoencoder's latents of the frames
        expected = ae.encode(frames_to_tensor(store.read(first).rgb)[None])[0]
    torch.testing.assert_close(torch.from_numpy(cache.get(first)).float(), expected,
                               atol=2e-2, rtol=1e-2)  # stored as float16
    assert main(["train", "encode", "--data", str(store.root), "--autoencoder",
                 str(ae_dir)]) == 0
    assert capsys.readouterr().out.startswith("encoded 0 episodes")


def test_encode_into_another_cache(store_and_autoencoder, tmp_path, capsys):
    store, _, ae_dir = store_and_autoencoder
    main(["train", "encode", "--data", str(store.root), "--autoencoder", str(ae_dir),
          "--latents", str(tmp_path / "elsewhere"), "--device", "cpu"])
    assert "encoded 2 episodes" in capsys.readouterr().out
    assert all(LatentCache(tmp_path / "elsewhere").has(i) for i in store.ids())
    assert not (store.root / "latents").exists()
