"""The training views of SIFTER-SimCSE and SimCSE, and their tokenization.

SIFTER's Y is the sentence X followed by its backbone ("X. Subject relation object."). Truncating Y
from the right at the training length (32 tokens) cuts the backbone first: on Brown a quarter of
the rows would train on a Y identical to X, and only half keep their whole backbone. So Y has
its own length, twice the training length: Y = the X view (X truncated as it is on its own)
followed by the whole backbone; only when the backbone would not fit does the X part give up
its end to it. On Brown at 32 (Y at 64) 99.9% of the backbones stay whole (97.1% if Y had to
fit in 32). X, Z and SimCSE's views are truncated from the right as usual. Y is tokenized and
encoded as its own group, so the longer Y adds no padding to the other views.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from sentray.contrastive.objectives import (
    SIFTER_VIEW_COLUMN,
    Objective,
    SifterWeights,
    objective_views,
)
from sentray.encode.encoder import special_tokens
from sentray.sifter.positives import tidy_spacing


def backbone_start(text: str, backbone_text: str) -> int | None:
    """Where Y's backbone begins (a character offset into Y), or None when Y has none.

    jobs/augment.py writes Y = tidy_spacing(X + " " + backbone), so Y starts with X's tidied
    text and the backbone is what follows it."""
    head = tidy_spacing(text)
    if len(backbone_text) > len(head) and backbone_text.startswith(head):
        return len(head)
    return None


@dataclass(frozen=True)
class TokenizedViews:
    input_ids: torch.Tensor  # (N, T), right-padded
    attention_mask: torch.Tensor  # (N, T)
    backbones: int  # texts that have a backbone to keep
    backbones_whole: int  # of those, the ones whose every backbone token is in input_ids


def tokenize_views(tokenizer, texts: Sequence[str], max_length: int,
                   keep_from: Sequence[int | None] | None = None,
                   keep_length: int | None = None) -> TokenizedViews:
    """Token ids of `texts`, special tokens added, at most `max_length` each, padded.

    `keep_from[i]` (a character offset, or None) marks the tail of text i that must survive
    truncation (Y's backbone). Such a text is its head truncated to `max_length` as any other
    text, followed by its whole tail, within `keep_length` tokens (default `max_length`); a
    tail too long for that cuts the head from its end instead, and is itself cut only when it
    alone exceeds `keep_length`. Without `keep_from`: plain right truncation, the same ids as
    `tokenizer(texts, truncation=True, max_length=max_length)`. Needs a fast tokenizer
    (offsets).
    """
    keep_from = list(keep_from) if keep_from is not None else [None] * len(texts)
    if len(keep_from) != len(texts):
        raise ValueError(f"{len(texts)} texts but {len(keep_from)} keep_from offsets")
    prefix, suffix = special_tokens(tokenizer)
    room = max_length - len(prefix) - len(suffix)
    keep_room = (keep_length or max_length) - len(prefix) - len(suffix)
    if room < 1 or keep_room < room:
        raise ValueError(f"max_length {max_length} (keep_length {keep_length}) leaves no room "
                         "for text tokens, or keep_length < max_length")
    encoded = tokenizer(list(texts), add_special_tokens=False, truncation=False,
                        return_offsets_mapping=True, return_attention_mask=False,
                        return_token_type_ids=False)
    rows, backbones, whole = [], 0, 0
    for ids, offsets, start in zip(encoded["input_ids"], encoded["offset_mapping"], keep_from,
                                   strict=True):
        if start is None:
            kept = ids[:room]
        else:
            split = next((i for i, (begin, _) in enumerate(offsets) if begin >= start), len(ids))
            tail = ids[split:]
            backbones += 1
            whole += len(tail) <= keep_room
            tail = tail[:keep_room]
            kept = ids[:min(split, room, keep_room - len(tail))] + tail
        rows.append(prefix + kept + suffix)
    width = max(len(r) for r in rows)
    input_ids = torch.full((len(rows), width), tokenizer.pad_token_id or 0, dtype=torch.long)
    attention_mask = torch.zeros((len(rows), width), dtype=torch.long)
    for i, row in enumerate(rows):
        input_ids[i, :len(row)] = torch.tensor(row, dtype=torch.long)
        attention_mask[i, :len(row)] = 1
    return TokenizedViews(input_ids, attention_mask, backbones, whole)


def backbone_length(max_length: int) -> int:
    """Y's length limit: the X view plus a backbone as long again."""
    return 2 * max_length


@dataclass(frozen=True)
class ViewGroup:
    """Views tokenized and padded together: `tokens` holds views[0]'s rows, then views[1]'s..."""

    views: tuple[str, ...]
    tokens: TokenizedViews


def tokenize_batch(tokenizer, batch: dict[str, np.ndarray], objective: Objective, rows: slice,
                   max_length: int, weights: SifterWeights | None = None) -> list[ViewGroup]:
    """This worker's rows of a global batch as the views the objective encodes
    (`objective_views`): Y, when used, as a group of its own (length `backbone_length`, whole
    backbone), the other views together (length `max_length`)."""
    views = objective_views(objective, weights)
    groups = []
    plain = tuple(v for v in views if v != "y")
    if plain:
        texts = [str(t) for v in plain for t in batch[SIFTER_VIEW_COLUMN[v]][rows]]
        groups.append(ViewGroup(plain, tokenize_views(tokenizer, texts, max_length)))
    if "y" in views:
        xs, ys = batch["text"][rows], batch["backbone_text"][rows]
        keep_from = [backbone_start(str(x), str(y)) for x, y in zip(xs, ys, strict=True)]
        groups.append(ViewGroup(("y",), tokenize_views(
            tokenizer, [str(y) for y in ys], max_length, keep_from, backbone_length(max_length))))
    return groups


def backbone_coverage(tokenizer, texts: Sequence[str], backbone_texts: Sequence[str],
                      max_length: int, chunk: int = 4096) -> dict:
    """How many Y views keep their whole backbone at the training length `max_length`: rows,
    rows with a backbone, rows whose backbone is whole, and the share (of the rows with a
    backbone)."""
    with_backbone = whole = 0
    for begin in range(0, len(texts), chunk):
        xs, ys = texts[begin:begin + chunk], backbone_texts[begin:begin + chunk]
        views = tokenize_views(tokenizer, ys, max_length,
                               [backbone_start(x, y) for x, y in zip(xs, ys, strict=True)],
                               backbone_length(max_length))
        with_backbone += views.backbones
        whole += views.backbones_whole
    return {"rows": len(texts), "rows_with_backbone": with_backbone,
            "backbone_whole": whole,
            "backbone_whole_share": whole / with_backbone if with_backbone else 1.0}
