"""The offline sentence encoder: determinism, the per-string cache, semantics, bad input."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from worldlab.model.textenc import MAX_CHARS, TEXT_DIM, TextEncoder


@pytest.fixture(scope="module")
def encoder() -> TextEncoder:
    return TextEncoder()  # loads the bundled model once for the module (~2 s)


def test_encode_is_deterministic_and_unit_norm(encoder):
    texts = ["a dark stone corridor", "an imp appears"]
    first = encoder.encode(texts)
    encoder.cache.clear()  # force a second real encoding
    second = encoder.encode(texts)
    assert first.shape == (2, TEXT_DIM) and first.dtype == torch.float32
    assert torch.equal(first, second)
    torch.testing.assert_close(first.norm(dim=-1), torch.ones(2), atol=1e-5, rtol=0)


def test_cache_hit_skips_the_model(encoder):
    encoder.encode(["a flooded courtyard"])
    assert "a flooded courtyard" in encoder.cache
    marker = np.full(TEXT_DIM, 7.0, dtype=np.float32)  # a cached value the model never makes
    encoder.cache["a flooded courtyard"] = marker
    out = encoder.encode(["a flooded courtyard", "a flooded courtyard"])
    assert torch.equal(out, torch.from_numpy(np.stack([marker, marker])))
    del encoder.cache["a flooded courtyard"]


def test_similar_prompts_are_closer(encoder):
    a, b, c = encoder.encode(["a dark corridor", "a dim hallway", "a monster throws a fireball"])
    assert a @ b > a @ c + 0.3 and a @ b > b @ c + 0.3


def test_encode_captions(encoder):
    out = encoder.encode_captions([("a dark corridor", "", "an imp appears"),
                                   ("", "a marine with a shotgun", "")])
    assert out.shape == (2, 3, TEXT_DIM)
    assert torch.equal(out[0, 1], torch.zeros(TEXT_DIM))  # empty field -> zeros
    assert torch.equal(out[1, 0], torch.zeros(TEXT_DIM)) and torch.equal(out[1, 2], out[1, 0])
    assert torch.equal(out[0, 0], encoder.encode(["a dark corridor"])[0])


@pytest.mark.parametrize("call,arg,message", [
    ("encode", ["ok", 3], r"texts\[1\] must be a str"),
    ("encode", ["   "], r"texts\[0\] is empty"),
    ("encode", ["x" * (MAX_CHARS + 1)], f"texts\\[0\\] has {MAX_CHARS + 1} characters; "
                                        f"expected at most {MAX_CHARS}"),
    ("encode", "a single string", "texts must be a list of str"),
    ("encode_captions", [("", " ", "")], r"captions\[0\] is empty in every field"),
    ("encode_captions", [("scene", "event")], r"captions\[0\] must be a \(scene, character"),
    ("encode_captions", [("scene", None, "")], r"captions\[0\].character must be a str"),
    ("encode_captions", [("a" * 201, "", "")], r"captions\[0\].scene has 201 characters"),
])
def test_bad_prompts(encoder, call, arg, message):
    before = dict(encoder.cache)
    with pytest.raises(ValueError, match=message):
        getattr(encoder, call)(arg)
    assert encoder.cache.keys() == before.keys()  # nothing half-cached
