"""Image-quality metrics on batches of frames: PSNR and SSIM, in plain torch; and two scores
of uint8 frame sets that PSNR misses, sharpness and colour (what a blurry autoencoder loses).

Both take two tensors of the same shape (..., c, h, w) and return one score per image,
shape (...). Images inside models are float in [-1, 1], so `data_range` defaults to 2.0;
pass `data_range=255.0` for uint8-valued images or 1.0 for [0, 1].

SSIM follows Wang et al. 2004 ("Image quality assessment: from error visibility to
structural similarity"): an 11x11 Gaussian window with sigma 1.5, K1 = 0.01, K2 = 0.03,
statistics per channel over 'valid' window positions (no padding), averaged over channels
and positions. This is the convention of the reference MATLAB code and of pytorch-msssim.

`sharpness` is the variance of the 3x3 Laplacian of the grey frame (the usual blur
measure, Pech-Pacheco et al. 2000; OpenCV's `Laplacian(grey).var()`); `colour_distance`
compares the colour histograms of two frame sets. Both are computed in float64 numpy on
uint8 frames (t, h, w, 3), as engines record them.

Shape names: t frames, c channels, h w height width.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

SSIM_WINDOW = 11
SSIM_SIGMA = 1.5
SSIM_K1, SSIM_K2 = 0.01, 0.03


def _check_pair(x: torch.Tensor, y: torch.Tensor) -> None:
    if x.shape != y.shape:
        raise ValueError(f"images must have the same shape, got {tuple(x.shape)} and "
                         f"{tuple(y.shape)}")
    if x.dim() < 3:
        raise ValueError(f"images must have shape (..., c, h, w), got {tuple(x.shape)}")


def psnr(x: torch.Tensor, y: torch.Tensor, data_range: float = 2.0) -> torch.Tensor:
    """Peak signal-to-noise ratio in dB per image: 10 log10(range^2 / MSE);
    (..., c, h, w) -> (...).

    Identical images give +inf.
    """
    _check_pair(x, y)
    mse = (x.double() - y.double()).pow(2).flatten(-3).mean(-1)  # (...)
    return (10.0 * torch.log10(data_range ** 2 / mse)).to(torch.float32)


def gaussian_window(size: int = SSIM_WINDOW, sigma: float = SSIM_SIGMA,
                    dtype: torch.dtype = torch.float64) -> torch.Tensor:
    """1-D Gaussian weights of length `size`, summing to 1; the 2-D window is its outer product."""
    if size < 1 or size % 2 == 0:
        raise ValueError(f"window size must be a positive odd integer, got {size}")
    r = torch.arange(size, dtype=dtype) - (size - 1) / 2
    g = torch.exp(-(r ** 2) / (2 * sigma ** 2))
    return g / g.sum()


def _blur(x: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
    """Separable 'valid' Gaussian filter of every channel: (m, 1, h, w) -> (m, 1, h', w')."""
    x = F.conv2d(x, g.view(1, 1, -1, 1))  # along h
    return F.conv2d(x, g.view(1, 1, 1, -1))  # along w


def ssim(x: torch.Tensor, y: torch.Tensor, data_range: float = 2.0,
         window: int = SSIM_WINDOW, sigma: float = SSIM_SIGMA) -> torch.Tensor:
    """Structural similarity per image, in [-1, 1] (1 = identical); (..., c, h, w) -> (...)."""
    _check_pair(x, y)
    *lead, c, h, w = x.shape
    if h < window or w < window:
        raise ValueError(f"images of {h}x{w} are smaller than the {window}x{window} SSIM "
                         f"window; pass a smaller odd `window`")
    g = gaussian_window(window, sigma).to(x.device)
    # every (image, channel) becomes one single-channel map: (m, 1, h, w), m = prod(lead) * c
    xs = x.double().reshape(-1, 1, h, w)
    ys = y.double().reshape(-1, 1, h, w)
    mu_x, mu_y = _blur(xs, g), _blur(ys, g)  # (m, 1, h', w')
    var_x = _blur(xs * xs, g) - mu_x ** 2
    var_y = _blur(ys * ys, g) - mu_y ** 2
    cov = _blur(xs * ys, g) - mu_x * mu_y
    c1 = (SSIM_K1 * data_range) ** 2  # keeps the ratios finite on flat, dark regions
    c2 = (SSIM_K2 * data_range) ** 2
    lum = (2 * mu_x * mu_y + c1) / (mu_x ** 2 + mu_y ** 2 + c1)
    struct = (2 * cov + c2) / (var_x + var_y + c2)
    per_map = (lum * struct).flatten(1).mean(1)  # (m,)
    return per_map.view(*lead, c).mean(-1).to(torch.float32)  # (...)


# ----------------------------------------------------------------------------------------
# Scores of uint8 frames (what engines record and front ends show)
# ----------------------------------------------------------------------------------------


def _as_uint8_frames(frames) -> np.ndarray:
    """Check that frames are uint8 (t, h, w, 3); return them as a numpy array."""
    x = np.asarray(frames)
    if x.dtype != np.uint8 or x.ndim != 4 or x.shape[-1] != 3:
        raise ValueError(f"frames must be uint8 (t, h, w, 3), got {x.dtype} {x.shape}")
    return x


def _uint8_frames(frames) -> torch.Tensor:
    """uint8 (t, h, w, 3) -> float (t, 3, h, w) in [-1, 1]."""
    x = np.ascontiguousarray(_as_uint8_frames(frames))
    return torch.from_numpy(x).permute(0, 3, 1, 2).float() / 127.5 - 1


def frame_psnr(pred, true) -> np.ndarray:
    """PSNR (dB) per frame of uint8 frames (t, h, w, 3): a numpy array (t,).

    Identical frames score `uint8_psnr_ceiling`, the PSNR of the smallest error uint8
    frames can have (one level of one value), not +inf, so a mean over frames stays a
    number when a prediction is exact somewhere (a repeated frame the engine shows again).
    """
    x = _as_uint8_frames(pred)
    p = psnr(_uint8_frames(x), _uint8_frames(true)).reshape(-1).numpy()
    return np.minimum(p, uint8_psnr_ceiling(x.shape[1:]))


def uint8_psnr_ceiling(shape: tuple[int, ...]) -> float:
    """The PSNR (dB) of uint8 frames of `shape` (h, w, 3) that differ by one level in one
    value: 10 log10(255^2 n), n = h w 3 (89.0 dB at 64 x 64)."""
    return float(10 * np.log10(255.0 ** 2 * np.prod(shape)))


def frame_ssim(pred, true) -> np.ndarray:
    """SSIM per frame of uint8 frames (t, h, w, 3): a numpy array (t,)."""
    return ssim(_uint8_frames(pred), _uint8_frames(true)).reshape(-1).numpy()


GREY_WEIGHTS = (0.299, 0.587, 0.114)  # ITU-R BT.601 luma, as OpenCV's RGB2GRAY
COLOUR_BINS = 32  # histogram bins per channel: 8 grey levels each


def sharpness(frames) -> np.ndarray:
    """Variance of the 3x3 Laplacian of the grey frame (0-255 scale), per frame: (t,).

    Kernel [[0, 1, 0], [1, -4, 1], [0, 1, 0]] at 'valid' positions (no padding, so the
    frame border adds no false edges). A flat frame scores 0; blur lowers the score.
    """
    x = _as_uint8_frames(frames)
    if x.shape[1] < 3 or x.shape[2] < 3:
        raise ValueError(f"sharpness needs frames of at least 3x3 pixels, got {x.shape}")
    g = x.astype(np.float64) @ np.array(GREY_WEIGHTS)  # (t, h, w)
    lap = (g[:, :-2, 1:-1] + g[:, 2:, 1:-1] + g[:, 1:-1, :-2] + g[:, 1:-1, 2:]
           - 4.0 * g[:, 1:-1, 1:-1])  # (t, h-2, w-2)
    return lap.reshape(len(x), -1).var(axis=1)


def sharpness_ratio(pred, true) -> float:
    """Mean sharpness of `pred` over mean sharpness of `true`, frame sets of one shape
    (t, h, w, 3): 1 = as much fine detail as the truth, < 1 blurrier, > 1 noisier."""
    p, t = _as_uint8_frames(pred), _as_uint8_frames(true)
    if p.shape != t.shape:
        raise ValueError(f"pred and true must have the same shape, got {p.shape} and "
                         f"{t.shape}")
    ref = float(sharpness(t).mean())
    if ref == 0.0:
        raise ValueError(f"the true frames {t.shape} are flat (sharpness 0); the sharpness "
                         f"ratio is undefined")
    return float(sharpness(p).mean()) / ref


def colour_histograms(frames) -> np.ndarray:
    """Normalised per-channel histograms of uint8 frames (t, h, w, 3): (3, COLOUR_BINS),
    each row sums to 1."""
    x = _as_uint8_frames(frames)
    bins = (x.reshape(-1, 3) // (256 // COLOUR_BINS)).astype(np.int64)  # (t*h*w, 3)
    counts = np.stack([np.bincount(bins[:, c], minlength=COLOUR_BINS) for c in range(3)])
    return counts / counts.sum(axis=1, keepdims=True)


def colour_distance(pred, true) -> float:
    """Distance between the colour distributions of two frame sets (any frame counts and
    sizes), in [0, 1]: the total variation distance (half the L1 distance) between their
    normalised 32-bin histograms, averaged over R, G and B. 0 = the same histograms,
    1 = disjoint histograms in every channel. Where the pixels are does not count:
    a reconstruction with the right palette in the wrong places scores 0.
    """
    hp, ht = colour_histograms(pred), colour_histograms(true)  # (3, bins) each
    return float(0.5 * np.abs(hp - ht).sum(axis=1).mean())
