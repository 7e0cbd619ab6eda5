"""Training views: plain truncation equals the tokenizer's own, Y keeps its whole backbone (cases
worked by hand, and the share on Brown sentences through the real augmentation), the views each
objective encodes."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from sentray.contrastive.objectives import SifterWeights, objective_views
from sentray.contrastive.view_tokens import (
    backbone_coverage,
    backbone_length,
    backbone_start,
    tokenize_batch,
    tokenize_views,
)
from sentray.encode.encoder import special_tokens

SAMPLE = Path(__file__).resolve().parents[2] / "sentray" / "data" / "sample.txt"
LONG = ("The jury further said in term-end presentments that the City Executive Committee, "
        "which had over-all charge of the election, deserves the praise and thanks of the City "
        "of Atlanta for the manner in which the election was conducted.")


def ids(tokenizer, text: str) -> list[int]:
    return tokenizer(text, add_special_tokens=False)["input_ids"]


def real(views, row: int) -> list[int]:
    return views.input_ids[row][views.attention_mask[row].bool()].tolist()


def test_plain_truncation_is_the_tokenizers_own(tokenizer):
    texts = [LONG, "A man plays a guitar.", "Nobody came."]
    views = tokenize_views(tokenizer, texts, 32)
    reference = tokenizer(texts, truncation=True, max_length=32, padding=True, return_tensors="pt")
    assert views.input_ids.tolist() == reference["input_ids"].tolist()
    assert views.attention_mask.tolist() == reference["attention_mask"].tolist()
    assert special_tokens(tokenizer) == ([tokenizer.cls_token_id], [tokenizer.sep_token_id])


def test_y_is_the_x_view_followed_by_its_whole_backbone(tokenizer):
    backbone = "Jury said in presentments."
    y = f"{LONG} {backbone}"
    start = backbone_start(LONG, y)
    assert y[start:] == " " + backbone
    views = tokenize_views(tokenizer, [y], 32, [start], backbone_length(32))
    cls, sep = tokenizer.cls_token_id, tokenizer.sep_token_id
    # worked by hand: [CLS] + the first 30 pieces of X (as the X view has them) + the backbone
    assert real(views, 0) == [cls] + ids(tokenizer, LONG)[:30] + ids(tokenizer, backbone) + [sep]
    assert (views.backbones, views.backbones_whole) == (1, 1)
    # Right truncation at 32 (the old behaviour) would have kept no backbone at all
    assert tokenizer(y, truncation=True, max_length=32)["input_ids"] == \
        tokenizer(LONG, truncation=True, max_length=32)["input_ids"]


def test_a_backbone_too_long_for_y_shortens_the_x_part_then_itself(tokenizer):
    backbone = " ".join(["word"] * 40)  # 40 pieces
    y = f"{LONG} {backbone}"
    views = tokenize_views(tokenizer, [y], 32, [backbone_start(LONG, y)], keep_length=48)
    # 46 pieces of room: the whole backbone (40) and the first 6 pieces of X
    assert real(views, 0)[1:-1] == ids(tokenizer, LONG)[:6] + ids(tokenizer, backbone)
    assert views.backbones_whole == 1
    views = tokenize_views(tokenizer, [y], 32, [backbone_start(LONG, y)], keep_length=32)
    assert real(views, 0)[1:-1] == ids(tokenizer, backbone)[:30]  # alone over the limit: cut
    assert (views.backbones, views.backbones_whole) == (1, 0)


def test_backbone_start_follows_the_augmentation_spacing():
    assert backbone_start("A  man  ran .", "A man ran. Man ran.") == len("A man ran.")
    assert backbone_start("A man ran.", "A man ran.") is None  # no backbone (source: none)
    assert backbone_start("A man ran.", "Something else.") is None


def test_each_objective_encodes_its_views_in_groups(tokenizer):
    batch = {"text": np.array(["x0 is here.", "x1 is here."]),
             "backbone_text": np.array(["x0 is here. X0 is.", "x1 is here. X1 is."]),
             "pruned_text": np.array(["x0 here.", "x1 here."])}
    groups = tokenize_batch(tokenizer, batch, "sifter", slice(1, 2), 32)
    assert [g.views for g in groups] == [("x", "z"), ("y",)]
    assert [tokenizer.decode(real(groups[0].tokens, i), skip_special_tokens=True)
            for i in range(2)] == ["x1 is here.", "x1 here."]
    assert tokenizer.decode(real(groups[1].tokens, 0), skip_special_tokens=True) == \
        "x1 is here. x1 is."
    assert groups[1].tokens.backbones_whole == 1
    simcse = tokenize_batch(tokenizer, batch, "simcse", slice(0, 2), 32)
    assert [g.views for g in simcse] == [("x", "x2")] and len(simcse[0].tokens.input_ids) == 4
    only_yz = tokenize_batch(tokenizer, batch, "sifter", slice(0, 2), 32, SifterWeights(0, 0, 1))
    assert [g.views for g in only_yz] == [("z",), ("y",)]
    assert objective_views("sifter", SifterWeights(1, 1, 1, 1)) == ("x", "y", "z", "x2")


@pytest.mark.slow
def test_brown_ys_keep_their_whole_backbone(tokenizer):
    """The bundled Brown sample through the real augmentation (spaCy + triplet-extract): at the
    training length 32 at least 99% of the Y views keep their whole backbone (the issue's bar;
    99.9% on all 44,961 kept Brown rows), against about half with right truncation at 32."""
    pytest.importorskip("triplet_extract", reason="the openie extra is not installed")
    from sentray.corpus.sources import CorpusConfig
    from sentray.sifter.actor import AugmentBatch
    from sentray.sifter.config import AugmentConfig

    texts = [t for t in SAMPLE.read_text().splitlines() if t.strip()][:300]
    n = len(texts)
    batch = AugmentBatch(AugmentConfig(corpus=CorpusConfig(input=str(SAMPLE)), output="unused"))(
        pa.table({"id": [f"s:{i}" for i in range(n)], "text": texts,
                  "previous_text": [None] + texts[:-1], "read_error": pa.nulls(n, pa.string()),
                  "source": ["s"] * n, "row": list(range(n)), "source_rows": [n] * n}))
    kept = batch.filter(pa.compute.is_null(batch.column("reject_reason")))
    xs, ys = kept.column("text").to_pylist(), kept.column("backbone_text").to_pylist()
    coverage = backbone_coverage(tokenizer, xs, ys, 32)
    # most rows have a backbone, so the share below is not of a few: views revision 55b left
    # 13.2% of 6,000 Brown rows without one (a fragment is not appended: docs/sifter-views.md)
    assert coverage["rows_with_backbone"] > 0.8 * len(xs)
    assert coverage["backbone_whole_share"] >= 0.99
    fits_in_32 = np.mean([len(i) <= 32 for i in tokenizer(ys)["input_ids"]])
    assert fits_in_32 < 0.8  # what right truncation at 32 kept whole
