"""A sharp autoencoder: blur and colour metrics with known answers, the patch critic, the
hinge GAN through the one-optimizer `fit`, and the recipe at 8x and 4x compression."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from worldlab.config import make_config
from worldlab.loading import load_module
from worldlab.metrics import colour_distance, sharpness, sharpness_ratio
from worldlab.model import autoencoder as A
from worldlab.model.discriminator import AutoencoderWithCritic, PatchDiscriminator
from worldlab.train import FrameDataset, autoencoder_train_config, fit, recipes
from worldlab.train.losses import (adaptive_weight, autoencoder_gan_loss, autoencoder_loss,
                                   hinge_d_loss, hinge_g_loss, reconstruction_loss,
                                   spectral_distance)
from worldlab.train.loop import step_generator

from synthetic_episodes import synthetic_rgb, synthetic_store


def tiny_cfg(**kw):
    return make_config("tiny", autoencoder={"disc_channels": 8, **kw}).autoencoder


def checkerboard(n: int, value: int = 255, channels=(0, 1, 2)) -> np.ndarray:
    """uint8 (1, n, n, 3): 1-pixel squares of 0 and `value` in `channels`."""
    board = (np.indices((n, n)).sum(0) % 2) * value
    out = np.zeros((1, n, n, 3), np.uint8)
    for c in channels:
        out[0, ..., c] = board
    return out


def tiny_pair(seed: int = 0, **kw) -> tuple[AutoencoderWithCritic, torch.Tensor]:
    cfg = tiny_cfg(**kw)
    ae, pair, _ = recipes.autoencoder_trainee(cfg, seed)
    frames = A.frames_to_tensor(synthetic_rgb(4, 32, seed=1))  # (4, 3, 32, 32)
    return pair, frames


# ----------------------------------------------------------------------------------------
# Metrics with known answers
# ----------------------------------------------------------------------------------------


def test_sharpness_known_answers():
    assert sharpness(np.full((2, 8, 8, 3), 77, np.uint8)).tolist() == [0.0, 0.0]
    # checkerboard: every valid pixel's 4 neighbours are its opposite, so the Laplacian is
    # +-4 * 255 on a half-half split of the 6x6 valid positions: variance (4 * 255)^2
    assert sharpness(checkerboard(8))[0] == pytest.approx(1020.0 ** 2)
    # red only: grey is 0.299 of it, and the variance scales by its square
    assert sharpness(checkerboard(8, channels=(0,)))[0] == pytest.approx((0.299 * 1020) ** 2)
    # vertical stripes: the two vertical neighbours agree, +-2 * 255
    stripes = np.zeros((1, 6, 6, 3), np.uint8)
    stripes[:, :, ::2] = 255
    assert sharpness(stripes)[0] == pytest.approx(510.0 ** 2)
    with pytest.raises(ValueError, match="at least 3x3"):
        sharpness(np.zeros((1, 2, 8, 3), np.uint8))
    with pytest.raises(ValueError, match=r"uint8 \(t, h, w, 3\), got float32"):
        sharpness(np.zeros((1, 8, 8, 3), np.float32))


def test_sharpness_ratio():
    board = checkerboard(8)
    assert sharpness_ratio(board, board) == 1.0
    half = (board // 2).astype(np.uint8)  # 127 instead of 255: the Laplacian halves
    assert sharpness_ratio(half, board) == pytest.approx((127 / 255) ** 2)
    with pytest.raises(ValueError, match="flat"):
        sharpness_ratio(board, np.zeros_like(board))
    with pytest.raises(ValueError, match="same shape"):
        sharpness_ratio(board, checkerboard(10))


def test_colour_distance_known_answers():
    rng = np.random.default_rng(0)
    frames = rng.integers(0, 256, (3, 8, 8, 3), dtype=np.uint8)
    assert colour_distance(frames, frames) == 0.0
    assert colour_distance(frames, frames[::-1, ::-1]) == 0.0  # positions do not count
    black, white = np.zeros((2, 4, 4, 3), np.uint8), np.full((1, 6, 6, 3), 255, np.uint8)
    assert colour_distance(black, white) == 1.0  # disjoint in every channel: the maximum
    half = np.concatenate([np.zeros((1, 6, 3, 3)), np.full((1, 6, 3, 3), 255)], 2)
    assert colour_distance(half.astype(np.uint8), white) == pytest.approx(0.5)
    red = black.copy()
    red[..., 0] = 255  # only R differs from black: 1 in one channel of 3
    assert colour_distance(red, black) == pytest.approx(1 / 3)


def test_evaluate_reports_sharpness_and_colour():
    ae = A.VideoAutoencoder.from_config_dataclass(tiny_cfg()).eval()
    scores = A.evaluate_autoencoder(ae, A.frames_to_tensor(synthetic_rgb(4, 32, seed=0)))
    assert set(scores) == {"psnr", "ssim", "sharpness_ratio", "colour_distance"}
    assert scores["sharpness_ratio"] > 0 and 0 < scores["colour_distance"] <= 1


def test_tokens_per_frame_table():
    table = {(d, p): A.tokens_per_frame(64, 64, d, p) for d in (8, 4) for p in (1, 2)}
    assert table == {(8, 1): 64, (8, 2): 16, (4, 1): 256, (4, 2): 64}
    with pytest.raises(ValueError, match="60x64 frame does not split into 16x16"):
        A.tokens_per_frame(60, 64, 8, 2)


# ----------------------------------------------------------------------------------------
# The critic and the hinge losses
# ----------------------------------------------------------------------------------------


def test_discriminator_shape_size_and_save(tmp_path):
    d = PatchDiscriminator.from_config_dataclass(make_config("small").autoencoder)
    assert sum(p.numel() for p in d.parameters()) == 694_689  # golden: small, 0.69 M
    assert d(torch.zeros(2, 3, 64, 64)).shape == (2, 1, 6, 6)  # 64 / 8 - 2 patches a side
    assert PatchDiscriminator(4, 8, 2)(torch.zeros(1, 4, 32, 32)).shape == (1, 1, 6, 6)
    with pytest.raises(ValueError, match=r"h and w >= 24, got \(1, 3, 16, 64\)"):
        d(torch.zeros(1, 3, 16, 64))
    d.save_pretrained(tmp_path / "d")
    assert (tmp_path / "d" / "diffusion_pytorch_model.safetensors").exists()
    back = load_module(PatchDiscriminator, tmp_path / "d")
    x = torch.rand(1, 3, 32, 32)
    assert torch.equal(back(x), d(x))


def test_hinge_losses_and_adaptive_weight_by_hand():
    real, fake = torch.tensor([2.0, 0.5, -1.0]), torch.tensor([-2.0, 0.0, 1.0])
    # relu(1 - real) = (0, 0.5, 2); relu(1 + fake) = (0, 1, 2)
    assert hinge_d_loss(real, fake).item() == pytest.approx(2.5 / 3 + 1.0)
    assert hinge_d_loss(torch.full((4,), 1.5), torch.full((4,), -3.0)).item() == 0.0
    assert hinge_g_loss(fake).item() == pytest.approx(1 / 3)
    w = torch.ones(4, requires_grad=True)  # d(3 sum w)/dw = 3s, d(sum w)/dw = 1s
    weight = adaptive_weight(3 * w.sum(), w.sum(), w)
    assert weight.item() == pytest.approx(6.0 / (2.0 + 1e-4)) and not weight.requires_grad
    assert adaptive_weight(3 * w.sum(), 0 * w.sum(), w).item() == 1e4  # clamped


# ----------------------------------------------------------------------------------------
# The GAN through one optimizer
# ----------------------------------------------------------------------------------------


def old_autoencoder_loss(cfg):
    """autoencoder_loss as it was before the GAN (HEAD at 31d5012), the reference."""
    def loss_fn(model, batch, generator):
        x = batch["frames"]
        recon, kl = model(x, generator=generator)
        l1 = (recon - x).abs().mean()
        mse = (recon - x).pow(2).mean()
        kl = kl.mean() / x[0].numel()
        loss = l1 + cfg.mse_weight * mse + cfg.kl_weight * kl
        return loss, {"l1": l1.item(), "mse": mse.item(), "kl": kl.item()}
    return loss_fn


def test_disc_weight_zero_is_the_old_loss_bit_for_bit():
    cfg = tiny_cfg()
    assert cfg.disc_weight == 0.0  # the default
    ae, trainee, loss_fn = recipes.autoencoder_trainee(cfg, 0)
    assert trainee is ae  # no critic is built
    rgb = synthetic_rgb(8, 32, seed=0)
    batch = {"frames": A.frames_to_tensor(rgb[:4])}
    new, new_logs = loss_fn(ae, batch, step_generator(0, 3))
    old, old_logs = old_autoencoder_loss(cfg)(ae, batch, step_generator(0, 3))
    assert torch.equal(new, old) and new_logs == old_logs
    runs = []
    for loss in (autoencoder_loss(cfg), old_autoencoder_loss(cfg)):
        model = recipes.autoencoder_trainee(cfg, 0)[0]
        fit(model, FrameDataset(rgb), autoencoder_train_config(cfg, steps=2), loss)
        runs.append(model.state_dict())
    assert all(torch.equal(runs[0][k], runs[1][k]) for k in runs[0])
    # the pair's reconstruction terms are the same numbers for the same batch and noise
    pair, _ = tiny_pair(disc_weight=0.5)
    _, logs = autoencoder_gan_loss(tiny_cfg(disc_weight=0.5))(pair, batch, step_generator(0, 3))
    _, alone = old_autoencoder_loss(cfg)(pair.autoencoder, batch, step_generator(0, 3))
    assert {k: logs[k] for k in alone} == alone


def grads(loss, params) -> list[torch.Tensor]:
    return list(torch.autograd.grad(loss, params, retain_graph=True))


@pytest.mark.parametrize("adversarial", [False, True])
def test_each_network_gets_only_its_own_gradient(adversarial):
    """The summed loss's gradient is, for D, the hinge loss's alone, and for the
    autoencoder the reconstruction's alone before disc_start and not after."""
    cfg = tiny_cfg(disc_weight=0.5, disc_start=3)
    pair, x = tiny_pair(disc_weight=0.5, disc_start=3)
    pair.step.fill_(3 if adversarial else 2)
    ae_params = list(pair.autoencoder.parameters())
    d_params = list(pair.discriminator.parameters())
    loss, logs = autoencoder_gan_loss(cfg)(pair, {"frames": x}, step_generator(0, 0))
    assert int(pair.step) == (4 if adversarial else 3)  # the pass was counted
    assert (logs["g_loss"] != 0.0) == adversarial and (logs["adv_weight"] > 0) == adversarial
    total_ae, total_d = grads(loss, ae_params), grads(loss, d_params)
    # the same pass again (eval mode: nothing counted; float rounding may differ)
    out = pair.eval()(x, generator=step_generator(0, 0))
    rec_only = autoencoder_loss(cfg)(pair.autoencoder, {"frames": x}, step_generator(0, 0))[0]
    d_only = grads(hinge_d_loss(out["real"], out["fake"]), d_params)
    close = lambda a, b: torch.allclose(a, b, rtol=1e-4, atol=1e-5)  # noqa: E731
    assert all(close(a, b) for a, b in zip(total_d, d_only))
    same = [close(a, b) for a, b in zip(total_ae, grads(rec_only, ae_params))]
    assert all(same) if not adversarial else sum(same) < len(same) / 2


def test_critic_learns_on_a_fixed_batch():
    cfg = tiny_cfg(disc_weight=0.5, disc_start=3)
    pair, x = tiny_pair(disc_weight=0.5, disc_start=3)
    opt = torch.optim.AdamW(pair.parameters(), lr=2e-3, weight_decay=0.0)
    loss_fn, logs = autoencoder_gan_loss(cfg), []
    for step in range(8):
        loss, log = loss_fn(pair, {"frames": x}, step_generator(0, step))
        opt.zero_grad()
        loss.backward()
        opt.step()
        logs.append(log)
    d_losses = [log["d_loss"] for log in logs]
    assert d_losses[-1] < d_losses[0] - 0.2, d_losses
    assert logs[-1]["real_logit"] > logs[-1]["fake_logit"]  # it tells them apart
    assert logs[-1]["l1"] < logs[0]["l1"]  # and the autoencoder still learns to reconstruct
    assert [log["g_loss"] != 0 for log in logs] == [False] * 3 + [True] * 5


def test_resampling_is_the_unlearned_reference():
    ref = A.Resampling(4)
    board = A.frames_to_tensor(checkerboard(32))[None]  # (1, 1, 3, 32, 32)
    z = ref.encode(board)
    assert z.shape == (1, 1, 3, 8, 8) and torch.allclose(z, torch.zeros_like(z))  # grey
    assert sharpness(A.tensor_to_frames(ref.decode(z)[0])).tolist() == [0.0]  # all detail lost
    flat = torch.full((2, 3, 3, 16, 16), 0.25)
    assert torch.allclose(ref.decode(ref.encode(flat)), flat)  # and nothing else
    scores = A.evaluate_autoencoder(ref, A.frames_to_tensor(synthetic_rgb(4, 32, seed=0)))
    assert scores["psnr"] > 20 and 0 < scores["sharpness_ratio"] < 1
    for bad in (1, 2.0, True):
        with pytest.raises(ValueError, match=f"int downsample >= 2, got {bad!r}"):
            A.Resampling(bad)
    with pytest.raises(ValueError, match="30x30 pixels do not split into 4x4 blocks"):
        ref.encode(torch.zeros(1, 1, 3, 30, 30))


# ----------------------------------------------------------------------------------------
# The amplitude-spectrum term
# ----------------------------------------------------------------------------------------


def test_spectral_distance_known_answers():
    ones, zeros = torch.ones(1, 1, 4, 4), torch.zeros(1, 1, 4, 4)
    # orthonormal DC of a 4x4 image of ones: 16 / 4 = 4, over 4 x 3 rfft bins
    assert spectral_distance(ones, zeros).item() == pytest.approx(4 / 12)
    x = torch.rand(2, 3, 16, 16, generator=torch.Generator().manual_seed(0)) * 2 - 1
    assert spectral_distance(x, x).item() == 0.0
    shifted = torch.roll(x, shifts=(3, 5), dims=(-2, -1))  # the same amplitudes
    assert spectral_distance(shifted, x).item() == pytest.approx(0.0, abs=1e-6)
    assert (shifted - x).abs().mean() > 0.3  # which pixel L1 punishes
    blurred = torch.nn.functional.avg_pool2d(x, 3, 1, 1, count_include_pad=False)
    assert spectral_distance(blurred, x) > 0.2  # the missing high frequencies


def test_spectral_exponent_moves_the_emphasis_to_high_frequencies():
    ones, zeros = torch.ones(1, 1, 4, 4), torch.zeros(1, 1, 4, 4)
    checker = (torch.arange(4)[:, None] + torch.arange(4)[None, :]) % 2 * 2.0 - 1
    assert spectral_distance(ones, zeros, 2.0).item() == 0.0  # the DC weighs |0|^2
    # the checkerboard is all at the corner (1/2, 1/2), amplitude 4: |k|^2 = 1/2 there,
    # over a mean |k|^2 of 2.375 / 12 on the 4 x 3 bins
    assert spectral_distance(checker[None, None], zeros, 2.0).item() == pytest.approx(
        4 * 0.5 / 2.375)
    assert spectral_distance(checker[None, None], zeros).item() == pytest.approx(4 / 12)
    x = torch.rand(2, 3, 16, 16, generator=torch.Generator().manual_seed(0))
    blurred = torch.nn.functional.avg_pool2d(x, 3, 1, 1, count_include_pad=False)
    shifted = torch.roll(x, shifts=(3, 5), dims=(-2, -1))
    assert spectral_distance(shifted, x, 2.0).item() == pytest.approx(0.0, abs=1e-6)
    assert spectral_distance(blurred, x, 2.0) > spectral_distance(blurred, x)
    cfg = tiny_cfg(spectral_weight=1.0, spectral_exponent=2.0)
    logs = reconstruction_loss(blurred, torch.ones(2), x, cfg)[2]
    assert logs["spectral"] == pytest.approx(spectral_distance(blurred, x, 2.0).item())
    with pytest.raises(ValueError, match="autoencoder.spectral_exponent must be >= 0"):
        make_config("tiny", autoencoder__spectral_exponent=-2.0)


def test_spectral_weight_adds_its_term_and_only_when_on():
    x = A.frames_to_tensor(synthetic_rgb(4, 32, seed=1))
    recon = torch.nn.functional.avg_pool2d(x, 3, 1, 1, count_include_pad=False)
    kl = torch.ones(4)
    plain, _, plain_logs = reconstruction_loss(recon, kl, x, tiny_cfg())
    assert "spectral" not in plain_logs  # off: the plain loss, bit for bit
    on, kl_term, logs = reconstruction_loss(recon, kl, x, tiny_cfg(spectral_weight=2.0))
    assert on.item() == pytest.approx(plain.item() + 2.0 * logs["spectral"])
    assert logs["spectral"] == pytest.approx(spectral_distance(recon, x).item())
    with pytest.raises(ValueError, match="autoencoder.spectral_weight must be >= 0"):
        make_config("tiny", autoencoder__spectral_weight=-1.0)


def test_spectral_term_trains_through_the_recipe():
    rgb, runs = synthetic_rgb(8, 32, seed=0), []
    for weight in (0.0, 1.0):  # the same seed, data and steps: only the term differs
        cfg = tiny_cfg(spectral_weight=weight)
        ae = recipes.autoencoder_trainee(cfg, 0)[0]
        fit(ae, FrameDataset(rgb), autoencoder_train_config(cfg, steps=2), autoencoder_loss(cfg))
        runs.append(ae.state_dict())
    changed = [k for k in runs[0] if not torch.equal(runs[0][k], runs[1][k])]
    assert any(k.startswith("vae.decoder.") for k in changed)


# ----------------------------------------------------------------------------------------
# The recipe: GAN, resume, 4x compression
# ----------------------------------------------------------------------------------------

SCORES = {"psnr", "ssim", "sharpness_ratio", "colour_distance"}


def test_recipe_trains_with_the_critic_and_saves_the_parts(tmp_path):
    store = synthetic_store(tmp_path / "store", episodes=3, t=8, size=32)
    cfg = tiny_cfg(disc_weight=0.5, disc_start=2, steps=4)
    states, plans = [], []
    run = recipes.autoencoder(store, cfg, tmp_path / "ae", device="cpu",
                              callbacks=[states.append], on_start=plans.append)
    assert plans[0]["critic_parameters"] == sum(
        p.numel() for p in run.discriminator.parameters()) > 0
    assert [s["g_loss"] != 0 for s in states] == [False, False, True, True]
    metrics = json.loads((tmp_path / "ae" / "metrics.json").read_text())
    assert set(metrics) == SCORES and metrics == run.scores
    ae = load_module(A.VideoAutoencoder, tmp_path / "ae" / "model")  # the autoencoder alone
    assert ae.config.scaling_factor == run.model.config.scaling_factor != 1.0
    d = load_module(PatchDiscriminator, tmp_path / "ae" / "discriminator")
    assert all(torch.equal(a, b) for a, b in zip(d.parameters(),
                                                 run.discriminator.parameters()))
    # resuming at step 2 continues the step count (and so the warm-up) where it stopped
    recipes.autoencoder(store, tiny_cfg(disc_weight=0.5, disc_start=2, steps=2),
                        tmp_path / "half", device="cpu")
    resumed = recipes.autoencoder(store, cfg, tmp_path / "half", device="cpu", resume=True)
    assert int(resumed.state["model"].step) == 4
    assert all(torch.equal(a, b) for a, b in zip(resumed.model.parameters(),
                                                 run.model.parameters()))


def test_a_4x_autoencoder_trains_through_the_recipe(tmp_path):
    store = synthetic_store(tmp_path / "store", episodes=3, t=8, size=32)
    cfg = tiny_cfg(block_out_channels=(8, 16, 16), disc_weight=0.5, disc_start=1, steps=3)
    run = recipes.autoencoder(store, cfg, tmp_path / "ae4", device="cpu")
    assert run.model.downsample == 4
    x = A.frames_to_tensor(store.read(store.ids()[0]).rgb)[None]  # (1, 8, 3, 32, 32)
    assert run.model.encode(x).shape == (1, 8, cfg.latent_channels, 8, 8)
    assert set(json.loads((tmp_path / "ae4" / "metrics.json").read_text())) == SCORES
    assert A.tokens_per_frame(32, 32, run.model.downsample, 1) == 64


def test_disc_fields_are_validated():
    for field, value, expected in [("disc_weight", -0.1, ">= 0"), ("disc_start", -1, ">= 0"),
                                   ("disc_channels", 0, ">= 1"), ("disc_layers", 1.5, "an int")]:
        with pytest.raises(ValueError, match=f"autoencoder.{field} must be {expected}"):
            make_config("tiny", **{f"autoencoder__{field}": value})


def test_fine_tuning_starts_from_the_given_weights(tmp_path):
    store = synthetic_store(tmp_path / "store", episodes=3, t=8, size=32)
    first = recipes.autoencoder(store, tiny_cfg(steps=2), tmp_path / "a", device="cpu")
    def gap(run):  # largest weight difference from the first run's
        return max((a - b).abs().max().item() for a, b in zip(run.model.parameters(),
                                                               first.model.parameters()))
    fresh = recipes.autoencoder(store, tiny_cfg(steps=1, lr=1e-9), device="cpu")
    tuned = recipes.autoencoder(store, tiny_cfg(steps=1, lr=1e-9), device="cpu",
                                init=tmp_path / "a" / "model")

    assert gap(tuned) < 1e-6 < 1e-4 < gap(fresh)  # one step at lr 1e-9 moves nothing
    # with resume, the run's checkpoint wins over init: `a` is at step 2, so nothing to do
    again = recipes.autoencoder(store, tiny_cfg(steps=2), tmp_path / "a", device="cpu",
                                init=tmp_path / "a" / "model", resume=True)
    assert again.state["step"] == 2 and gap(again) == 0
    with pytest.raises(ValueError, match="block_out_channels"):  # another architecture
        recipes.autoencoder(store, tiny_cfg(block_out_channels=(8, 16), steps=1),
                            device="cpu", init=tmp_path / "a" / "model")


def test_a_4x_autoencoder_starts_from_an_8x_one_minus_its_lowest_level(tmp_path):
    store = synthetic_store(tmp_path / "store", episodes=3, t=8, size=32)
    big = recipes.autoencoder(store, tiny_cfg(steps=2), tmp_path / "a", device="cpu").model
    small = recipes.autoencoder(store, tiny_cfg(block_out_channels=(8, 16, 16), steps=1,
                                                lr=1e-9),
                                device="cpu", init=tmp_path / "a" / "model").model
    assert (big.downsample, small.downsample) == (8, 4)
    enc, dec = small.vae.encoder, small.vae.decoder
    pairs = [(enc.conv_in, big.vae.encoder.conv_in),
             (enc.down_blocks[1], big.vae.encoder.down_blocks[1]),
             (enc.down_blocks[2].resnets, big.vae.encoder.down_blocks[2].resnets),
             (enc.mid_block, big.vae.encoder.mid_block),
             (dec.up_blocks[0], big.vae.decoder.up_blocks[1]),  # 16 -> 32 pixels in both
             (dec.up_blocks[2], big.vae.decoder.up_blocks[3]), (dec.conv_out,
                                                               big.vae.decoder.conv_out)]
    for mine, theirs in pairs:
        for a, b in zip(mine.parameters(), theirs.parameters(), strict=True):
            assert (a - b).abs().max() < 1e-6
    assert enc.down_blocks[2].downsamplers is None  # the kept last level no longer halves


def test_more_latent_channels_start_by_decoding_as_the_fewer_did(tmp_path):
    store = synthetic_store(tmp_path / "store", episodes=3, t=8, size=32)
    narrow = recipes.autoencoder(store, tiny_cfg(steps=2), tmp_path / "a", device="cpu").model
    wide = recipes.autoencoder(store, tiny_cfg(latent_channels=7, steps=1, lr=1e-9),
                               device="cpu", init=tmp_path / "a" / "model").model
    x = A.frames_to_tensor(store.read(store.ids()[0]).rgb)  # (8, 3, 32, 32)
    with torch.no_grad():
        mine, theirs = wide.vae.encode(x).latent_dist, narrow.vae.encode(x).latent_dist
        assert mine.mean.shape[1] == 7 and torch.allclose(mine.mean[:, :4], theirs.mean,
                                                          atol=1e-5)
        # the new channels are as nearly deterministic as the trained ones (cycled)
        assert torch.allclose(mine.logvar[:, 4:], theirs.logvar[:, :3], atol=1e-5)
        assert not torch.allclose(mine.mean[:, 4:], theirs.mean[:, :3], atol=1e-2)
        assert torch.allclose(wide.vae.decode(mine.mode()).sample,
                              narrow.vae.decode(theirs.mode()).sample, atol=1e-5)
    # training reaches the new channels through the decoder's zero columns
    tuned = recipes.autoencoder(store, tiny_cfg(latent_channels=7, steps=2, lr=1e-2),
                                device="cpu", init=tmp_path / "a" / "model").model
    assert tuned.vae.decoder.conv_in.weight[:, 4:].abs().max() > 0
    with pytest.raises(ValueError, match="widens 7 latent channels, got 4"):
        A.with_more_latent_channels(narrow.state_dict(), wide.state_dict())
    with pytest.raises(ValueError, match="layers_per_block"):  # only the channels may differ
        recipes.autoencoder(store, tiny_cfg(latent_channels=7, layers_per_block=2, steps=1),
                            device="cpu", init=tmp_path / "a" / "model")


def test_decoder_only_fine_tuning_keeps_the_latents(tmp_path):
    store = synthetic_store(tmp_path / "store", episodes=3, t=8, size=32)
    first = recipes.autoencoder(store, tiny_cfg(steps=2), tmp_path / "a", device="cpu")
    cfg = tiny_cfg(steps=3, lr=1e-2, train_encoder=False, disc_weight=0.5, disc_start=1)
    tuned = recipes.autoencoder(store, cfg, device="cpu", init=tmp_path / "a" / "model")
    x = A.frames_to_tensor(store.read(store.ids()[0]).rgb)[None]  # (1, 8, 3, 32, 32)
    assert torch.equal(tuned.model.encode(x), first.model.encode(x))  # scale included
    moved = [not torch.equal(a, b) for a, b in zip(tuned.model.vae.decoder.parameters(),
                                                  first.model.vae.decoder.parameters())]
    assert all(moved)
    with pytest.raises(ValueError, match="start from saved weights"):
        recipes.autoencoder(store, cfg, device="cpu")
    with pytest.raises(ValueError, match="keeps the encoder of"):  # a 4x one from an 8x one
        recipes.autoencoder(store, tiny_cfg(block_out_channels=(8, 16, 16), steps=1,
                                            train_encoder=False),
                            device="cpu", init=tmp_path / "a" / "model")
    with pytest.raises(ValueError, match="train_encoder must be true or false"):
        make_config("tiny", autoencoder__train_encoder="no")


def test_seed_rows_are_summarised_against_the_bars():
    """`table worlds --autoencoders`: rows BASE_seedN beside BASE (its seed 0) pooled by
    `stats.combine_seeds` (mean, sample standard deviation, min, max), with the bar check of
    the mean and of each seed; a row without other seeds is left alone."""
    from worldlab.evaluate import compare_worlds as cw

    def row(psnr, sharp):
        scores = {"psnr": psnr, "ssim": 0.8, "sharpness_ratio": sharp, "colour_distance": 0.05}
        return {**scores, "heldout_map": {**scores, "psnr": psnr - 1.5}}

    rows = {"ch4": row(32.1, 0.27), "w": row(30.0, 0.69), "w_seed1": row(30.3, 0.71),
            "w_seed2": row(30.6, 0.73), "lone_seed1": row(40.0, 0.9)}
    summary = cw.seed_summary(rows)
    assert list(summary) == ["w"] and summary["w"]["seeds"] == 3
    assert summary["w"]["psnr"]["mean"] == pytest.approx(30.3)
    assert summary["w"]["psnr"]["std"] == pytest.approx(0.3)  # n - 1
    assert (summary["w"]["sharpness_ratio"]["min"], summary["w"]["sharpness_ratio"]["max"]) \
        == (0.69, 0.73)
    assert summary["w"]["heldout_map"]["psnr"]["mean"] == pytest.approx(28.8)
    assert summary["w"]["mean_clears_bars"] and summary["w"]["seeds_clearing_bars"] == 2
    rows["w_seed2"] = row(29.4, 0.73)  # the mean PSNR falls under 30 dB
    assert not cw.seed_summary(rows)["w"]["mean_clears_bars"]
