"""The training loop as it runs, read from what it records: one real 1-worker Ray Train run on a
tiny model, whose evaluation records carry the lr the optimizer step used and the gradient norm
before and after clipping. The tests fail on a loop that stops clipping or stops following the
schedule (each was run against a loop broken that way: see docs/testing.md). The same run's
model declares a sentence-transformers `max_seq_length` other than its tokenizer's limit, so the
length the loop scores STS-B dev at and the exports encode at is checked against both."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import config_of, encoder_of

from sentray.contrastive.config import TrainConfig
from sentray.contrastive.job import plan_run, run_training
from sentray.encode.config import EncoderConfig

SAMPLE = Path(__file__).resolve().parents[2] / "sentray" / "data" / "sample.txt"
ROWS, BATCH = 160, 16  # 10 steps an epoch
EPOCHS, MAX_STEPS, WARMUP_RATIO, LR = 2, 8, 0.25, 5e-4  # 20 steps of epochs, capped at 8
WARMUP = 2  # ceil(0.25 * 8)
MAX_GRAD_NORM = 1.0  # the job's default; this tiny model's gradient norms are 20-60
ST_MAX_SEQ_LENGTH, TOKENIZER_LIMIT = 8, 64  # sentence_bert_config.json vs tokenizer_config.json
LONG = ("The committee approved the plan after a long debate about the budget, the schedule "
        "and the many objections raised by the neighbours.")


def expected_lr(step: int) -> float:
    """The lr of optimizer step `step` (1-based), worked out by hand from the documented rule:
    linear warm-up from 0 over WARMUP steps, then linear decay to 0 at MAX_STEPS, the run's last
    step (not at EPOCHS x steps per epoch = 20). With s = step - 1 updates before it:
    LR * s / WARMUP during the warm-up, else LR * (MAX_STEPS - s) / (MAX_STEPS - WARMUP)."""
    s = step - 1
    return LR * s / WARMUP if s < WARMUP else LR * (MAX_STEPS - s) / (MAX_STEPS - WARMUP)


@pytest.fixture(scope="module")
def st_limited_model(tmp_path_factory, tiny_model_dir) -> Path:
    """The tiny encoder with a sentence-transformers sentence_bert_config.json saying 8 tokens
    while its tokenizer allows 64 (and its positions 128); no 1_Pooling, so it trains as a raw
    encoder: [CLS] + MLP."""
    folder = tmp_path_factory.mktemp("st-limited")
    shutil.copytree(tiny_model_dir, folder, dirs_exist_ok=True)
    tokenizer_config = json.loads((folder / "tokenizer_config.json").read_text())
    tokenizer_config["model_max_length"] = TOKENIZER_LIMIT
    (folder / "tokenizer_config.json").write_text(json.dumps(tokenizer_config))
    (folder / "sentence_bert_config.json").write_text(json.dumps(
        {"max_seq_length": ST_MAX_SEQ_LENGTH, "do_lower_case": False}))
    return folder


@pytest.fixture(scope="module")
def checked_run(ray_cluster, tmp_path_factory, st_limited_model, data_dir):
    views = tmp_path_factory.mktemp("views")
    texts = [t for t in SAMPLE.read_text().splitlines() if t.strip()][:ROWS]
    pq.write_table(pa.table({
        "id": [f"sample:{i}" for i in range(len(texts))], "text": texts,
        "backbone_text": [f"{t} {' '.join(t.split()[:3])}" for t in texts],
        "pruned_text": [" ".join(w for w in t.split() if w.lower() != "the") for t in texts],
    }), views / "part-0.parquet")
    config = config_of(TrainConfig,
        input=str(views), output=str(tmp_path_factory.mktemp("run")),
        model=str(st_limited_model), workers=1, batch_size=BATCH, epochs=EPOCHS,
        max_steps=MAX_STEPS, warmup_ratio=WARMUP_RATIO, lr=LR, max_grad_norm=MAX_GRAD_NORM,
        eval_steps=2, eval_batch_size=256, seed=7, data_dir=str(data_dir), log_steps=100,
        max_failures=0)
    config = plan_run(config)[0]
    return config, run_training(config)


@pytest.mark.ray
@pytest.mark.slow
def test_the_loop_follows_the_schedule_to_the_last_step_of_the_run(checked_run):
    """The lr each evaluated step's update used, as the optimizer held it. A loop that skips
    scheduler.step() trains at 0 (the warm-up's start) throughout; one whose schedule runs over
    the epochs' 20 steps instead of --max-steps' 8 is at 5e-4, not 2.5e-4, at step 6."""
    _, summary = checked_run
    history = summary["history"]
    assert [r["step"] for r in history] == [2, 4, 6, 8] and summary["steps"] == MAX_STEPS
    assert summary["schedule"] == {"warmup_steps": WARMUP, "decay_to_zero_at_step": MAX_STEPS,
                                   "max_grad_norm": MAX_GRAD_NORM}
    # the same double-precision products as LambdaLR's, in another order: 1e-12 apart at most
    assert [r["lr_used"] for r in history] == pytest.approx(
        [expected_lr(r["step"]) for r in history], rel=1e-9)
    assert [expected_lr(s) for s in (2, 4, 6, 8)] == pytest.approx(
        [2.5e-4, LR * 5 / 6, LR * 3 / 6, LR * 1 / 6])  # worked once more, by hand
    assert history[-1]["lr"] == 0.0  # after the run's last step the decay has reached 0


@pytest.mark.ray
@pytest.mark.slow
def test_the_loop_clips_the_gradient_of_every_step(checked_run):
    """The gradient norm before clipping (clip_grad_norm_'s answer) is above --max-grad-norm at
    every evaluated step, and the norm of the gradient the update was made with, measured
    after the step, is at the limit; no step of any window went above it. A loop that skips
    the clip has after = before, 20-60 times the limit here."""
    _, summary = checked_run
    for record in summary["history"]:
        assert record["grad_norm_before_clip"] > 2 * MAX_GRAD_NORM, record  # clipping matters
        # clip_grad_norm_ scales by max / (norm + 1e-6): after = max * norm / (norm + 1e-6),
        # within 1e-6 of max for a norm above 2; float32 sums add ~1e-6 relative
        assert record["grad_norm_after_clip"] == pytest.approx(MAX_GRAD_NORM, rel=2e-4), record
        assert record["largest_grad_norm_after_clip"] <= MAX_GRAD_NORM * (1 + 1e-5), record
        assert record["grad_norm"] > 2 * MAX_GRAD_NORM  # the window's mean, before clipping


@pytest.mark.ray
@pytest.mark.slow
def test_the_length_the_model_declares_is_what_the_loop_scores_and_the_exports_encode_at(
        checked_run, data_dir):
    """sentence_bert_config.json says 8 tokens, the tokenizer 64: sentence-transformers encodes
    such a model at 8, so sentray must too, in the loop's STS-B dev scoring and in both exports.
    Scored or encoded at 64 the numbers differ, so each check below can fail."""
    from sentence_transformers import SentenceTransformer

    from sentray.evaluation import senteval
    from sentray.evaluation.sts import score_pairs

    config, summary = checked_run
    assert config.encoder.max_length == 32  # training's own truncation (--max-length), not the model's
    output = Path(config.output)
    recorded = json.loads((output / "best" / "sentray.json").read_text())["max_length"]
    exported = encoder_of(EncoderConfig(model=str(output / "best")))
    st = SentenceTransformer(str(output / "best-st"), device="cpu")
    assert recorded == exported.max_length == st.max_seq_length == ST_MAX_SEQ_LENGTH
    # what they encode: the long sentence cut at 8 tokens, not at 64 (same weights through two
    # code paths: float32 rounding, 1e-5)
    at = {n: encoder_of(EncoderConfig(model=str(output / "best"), max_length=n))
          for n in (ST_MAX_SEQ_LENGTH, TOKENIZER_LIMIT)}
    ours, theirs = exported.encode([LONG]), st.encode([LONG])
    assert np.allclose(ours, theirs, atol=1e-5)
    assert np.allclose(ours, at[ST_MAX_SEQ_LENGTH].encode([LONG]), atol=1e-6)
    assert not np.allclose(ours, at[TOKENIZER_LIMIT].encode([LONG]), atol=1e-3)
    # the loop scored dev at 8 too: its best score is the export's at 8 (0.01: the same
    # weights in other batches and threads), and far from the export's at 64
    dev = senteval.load_sts_benchmark(data_dir, "dev")
    assert score_pairs(at[ST_MAX_SEQ_LENGTH], dev) == pytest.approx(summary["best_stsb_dev"],
                                                                    abs=0.01)
    assert abs(score_pairs(at[TOKENIZER_LIMIT], dev) - summary["best_stsb_dev"]) > 0.1
