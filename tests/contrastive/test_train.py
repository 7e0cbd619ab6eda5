"""Training: config and input checks, the model and data pieces, and real 2-worker CPU DDP runs
on Ray Train with a tiny model (loss goes down, workers stay in sync, a killed worker resumes
to the same result, reruns resume, exports load)."""

from __future__ import annotations

import json
import random
import shutil
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch
from conftest import config_of, encoder_of, make_tiny_bert, with_flags
from safetensors.torch import load_file

from sentray.contrastive import input_data
from sentray.contrastive.config import TrainConfig
from sentray.contrastive.epoch_order import EpochOrder
from sentray.contrastive.input_data import epoch_datasets, inspect_input
from sentray.contrastive.job import plan_run, run_training
from sentray.contrastive.model import ContrastiveModel, build_model
from sentray.contrastive.objectives import SifterWeights
from sentray.contrastive.optimizer import adamw, clipped_step, linear_schedule
from sentray.encode.config import EncoderConfig
from sentray.encode.model_files import model_facts
from sentray.encode.model_lookup import resolve_model
from sentray.encode.pooled_model import PooledEncoder
from sentray.encode.pooling_catalog import read_out
from sentray.kit import storage
from sentray.kit.config_files import flat_record
from sentray.kit.settings_record import write_settings
from sentray.training.steps import step_seed

SAMPLE = Path(__file__).resolve().parents[2] / "sentray" / "data" / "sample.txt"


VIEW_SETTINGS = {"z_rule": "penn", "seed": 0, "triple": "random"}


def write_views(folder: Path, rows: int, *, nulls: bool = False, drop: str | None = None) -> Path:
    """A small augmentation-like output: id, text, backbone_text, pruned_text."""
    texts = [t for t in SAMPLE.read_text().splitlines() if t.strip()][:rows]
    table = pa.table({
        "id": [f"sample:{i}" for i in range(len(texts))],
        "text": texts,
        "backbone_text": [t + " " + " ".join(t.split()[:3]) for t in texts],
        "pruned_text": [" ".join(w for w in t.split() if w.lower() not in {"the", "a", "an"})
                        for t in texts],
    })
    if nulls:
        table = table.set_column(3, "pruned_text", pa.array([None] + texts[1:]))
    if drop:
        table = table.drop_columns([drop])
    (folder / "sample").mkdir(parents=True)
    pq.write_table(table, folder / "sample" / "part-0.parquet")
    return folder


# -- config and input ---------------------------------------------------------------------------


@pytest.mark.parametrize("fields, message", [
    ({"batch_size": 63, "workers": 2}, "divisible"),
    ({"objective": "triplet"}, "objective"),
    ({"precision": "fp16"}, "use-gpu"),
    ({"dropout": 1.0}, "dropout"),
    ({"max_steps": 0}, "max_steps"),
    ({"pooling": "ditto", "model": "some/unknown-model"}, "head"),
    ({"head": "0-1"}, "Ditto"),
    ({"name": "a/b"}, "folder name"),
])
def test_bad_config_is_rejected_before_anything_runs(fields, message):
    """On construction, or (what needs the model's files: its known Ditto head) when the
    run plans its encoder (`plan_run`), which run_training does before anything runs."""
    with pytest.raises(ValueError, match=message):
        plan_run(config_of(TrainConfig, input="x", **fields))


# SIFTER §5.3 (../shared/papers/sifter.txt): "one epoch using the AdamW optimizer ... learning
# rate = 1e-5 and batch size = 64 ... The three lambda parameters in eq. 2 are all 1 ... The
# temperature tau is set to 0.05, and the dropout rate is p = 0.15 ... evaluate the model every
# 125 training steps on the development set of STS-B". The paper gives no max_length; it
# "essentially follows the setup of the ESimCSE paper", and SimCSE's run_unsup_example.sh
# (princeton-nlp/SimCSE) passes --max_seq_length 32.
SIFTER_PAPER = {"epochs": 1, "lr": 1e-5, "batch_size": 64, "temperature": 0.05,
                "dropout": 0.15, "eval_steps": 125, "max_length": 32}
# SimCSE (Gao et al. 2021), unsupervised BERT-base: batch 64, lr 3e-5 (Appendix A; its
# run_unsup_example.sh: one epoch, --max_seq_length 32, --eval_steps 125, --temp 0.05), dropout
# p = 0.1 (BERT's own; §3, Table 2: the best of the rates tried).
SIMCSE_PAPER = {**SIFTER_PAPER, "lr": 3e-5, "dropout": 0.1}


def test_config_defaults_are_each_objectives_papers():
    config = config_of(TrainConfig, input="x")
    assert (config.dropout, config.lr) == (None, None)  # decided with the objective
    sifter = config.resolved()
    assert {k: flat_record(sifter)[k] for k in SIFTER_PAPER} == SIFTER_PAPER
    assert (sifter.lambdas.xy, sifter.lambdas.xz, sifter.lambdas.yz, sifter.lambdas.xx) == (
        1.0, 1.0, 1.0, 0.0)  # eq. 2 with every lambda 1, no dropout pair
    assert sifter.objective == "sifter" and sifter.views == 3
    simcse = config_of(TrainConfig, input="x", objective="simcse").resolved()
    assert {k: flat_record(simcse)[k] for k in SIMCSE_PAPER} == SIMCSE_PAPER
    # a value given is kept whatever the objective (the study's SimCSE rows ran at 0.15)
    given = config_of(TrainConfig, input="x", objective="simcse", dropout=0.15, lr=1e-5).resolved()
    assert (given.dropout, given.lr) == (0.15, 1e-5)
    assert config_of(TrainConfig, input="x", dropout=0.0).resolved().dropout == 0.0  # 0 is a value


def test_default_read_out_is_the_models_own(tiny_model_dir):
    """A sentence-transformers model trains its own pooling without an MLP; a raw encoder (no
    1_Pooling, no sentray.json) gets the paper's [CLS] + MLP; explicit choices win."""
    minilm, _ = plan_run(config_of(TrainConfig, input="x"))  # all-MiniLM-L6-v2's 1_Pooling: mean
    assert (minilm.encoder.pooling, minilm.mlp) == ("last_avg", False)
    raw, _ = plan_run(config_of(TrainConfig, input="x", model=str(tiny_model_dir)))
    assert (raw.encoder.pooling, raw.mlp) == ("cls_before_pooler", True)
    assert plan_run(config_of(TrainConfig, input="x", pooling="cls_before_pooler"))[0].mlp
    assert plan_run(config_of(TrainConfig, input="x", pooling="mean", mlp=True))[0].mlp
    assert config_of(TrainConfig, input="x").resolved().name == "sifter"  # the name: the objective


def test_ditto_without_a_head_keeps_the_models_known_head(tokenizer):
    """Defect: the known head was looked up while validating, then dropped (head None), so the
    workers failed after Ray had started and the export wrote head: null."""
    config = config_of(TrainConfig, input="x", model="bert-base-uncased", pooling="ditto",
                       mlp=False)
    # the plan's rule (offline, bert-base-uncased's files cannot be read here: it declares no
    # read-out of its own, as its Hub folder does not)
    encoder = config.encoder
    pooling, head = read_out(encoder.pooling, encoder.head, encoder.model, None, None,
                             "cls_before_pooler")
    assert (pooling, head) == ("ditto", "0-9")  # Ditto's official head for bert-base-uncased
    model = ContrastiveModel(make_tiny_bert(tokenizer.vocab_size, heads=12), pooling,
                             head=head, mlp=config.mlp)  # as build_model makes it
    assert model.pooled.layer_head == (0, 9)
    with pytest.raises(ValueError, match="needs a head"):
        plan_run(config_of(TrainConfig, input="x", model="some/unknown-model", pooling="ditto",
                           mlp=False))


def test_sifter_views_follow_the_weights():
    assert config_of(TrainConfig, input="x", lambdas=SifterWeights(1, 0, 0)).views == 2  # X, Y
    assert config_of(TrainConfig, input="x", lambdas=SifterWeights(0, 0, 1)).views == 2  # Y, Z
    assert config_of(TrainConfig, input="x", lambdas=SifterWeights(1, 1, 1, 1)).views == 4  # X, Y, Z, X'
    assert config_of(TrainConfig, input="x", objective="simcse").views == 2


@pytest.mark.parametrize("fields, message", [
    ({"warmup_ratio": 1.0}, "warmup_ratio"),
    ({"max_grad_norm": -1.0}, "max_grad_norm"),
])
def test_bad_schedule_is_rejected(fields, message):
    with pytest.raises(ValueError, match=message):
        config_of(TrainConfig, input="x", pooling="mean", mlp=False, **fields)


def test_input_is_checked_with_clear_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        inspect_input(config_of(TrainConfig, input=str(tmp_path / "missing")))
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match="no .parquet"):
        inspect_input(config_of(TrainConfig, input=str(tmp_path / "empty")))
    no_y = write_views(tmp_path / "no-y", 100, drop="backbone_text")
    with pytest.raises(ValueError, match="backbone_text"):
        inspect_input(config_of(TrainConfig, input=str(no_y)))
    assert inspect_input(config_of(TrainConfig, input=str(no_y), objective="simcse")).rows == 100
    with pytest.raises(ValueError, match="1 rows have no 'pruned_text'.*sample:0"):
        inspect_input(config_of(TrainConfig, input=str(write_views(tmp_path / "nulls", 100, nulls=True))))
    few = write_views(tmp_path / "few", 10)
    with pytest.raises(ValueError, match="fewer than one global batch"):
        inspect_input(config_of(TrainConfig, input=str(few)))


def test_a_runs_record_always_says_what_its_input_was_made_with(tmp_path):
    """The summary's input_settings: jobs/augment.py's _settings.json (its Z rule among them),
    or, for an input without one, a statement that they are unknown; never null. (The 2-worker
    run below checks the summary carries it.)"""
    folder = write_views(tmp_path / "views", 20)
    config = config_of(TrainConfig, input=str(folder))
    unknown = input_data.input_settings(config)
    assert list(unknown) == ["unknown"] and "holds no _settings.json" in unknown["unknown"]
    write_settings(storage.locate(str(folder)), VIEW_SETTINGS, "augment")
    assert input_data.input_settings(config) == VIEW_SETTINGS


def test_input_plan_counts_steps_and_the_rows_past_the_last_batch(tmp_path):
    folder = str(write_views(tmp_path / "views", 100))
    plan = inspect_input(config_of(TrainConfig, input=folder, batch_size=16, epochs=3))
    assert (plan.rows, plan.steps_per_epoch, plan.total_steps, plan.dropped_per_epoch) == (
        100, 6, 18, 4)
    assert inspect_input(config_of(TrainConfig, input=folder, batch_size=16, epochs=3,
                                     max_steps=7)).total_steps == 7


def test_backbone_coverage_samples_a_large_input_the_same_way_each_run(tmp_path, monkeypatch,
                                                                        tiny_model_dir):
    """Past COVERAGE_ROWS rows the driver tokenizes a seeded sample, not the whole input: the
    figure says so (rows < input_rows) and is the same on every run."""
    folder = str(write_views(tmp_path / "views", 100))
    config, encoder = plan_run(config_of(TrainConfig, input=folder, model=str(tiny_model_dir),
                                         max_length=32))
    whole = input_data.input_backbone_coverage(config, encoder)
    assert (whole["rows"], whole["input_rows"]) == (100, 100)
    monkeypatch.setattr(input_data, "COVERAGE_ROWS", 40)
    looked = []
    real = input_data.backbone_coverage
    monkeypatch.setattr(input_data, "backbone_coverage",
                        lambda tok, xs, ys, n: looked.append(xs) or real(tok, xs, ys, n))
    sampled = [input_data.input_backbone_coverage(config, encoder) for _ in range(2)]
    assert sampled[0] == sampled[1] and (sampled[0]["rows"], sampled[0]["input_rows"]) == (40, 100)
    texts = [t for t in SAMPLE.read_text().splitlines() if t.strip()][:100]
    assert looked[0] == looked[1] and len(looked[0]) == 40 and looked[0] != texts[:40]
    assert looked[0] == [t for t in texts if t in set(looked[0])]  # in input order
    assert input_data.input_backbone_coverage(
        with_flags(config, objective="simcse"), encoder) is None


# -- data and model pieces ----------------------------------------------------------------------


def test_epoch_order_depends_on_seed_epoch_and_id_only():
    table = pa.table({"id": [f"r{i}" for i in range(50)], "text": ["x"] * 50})
    whole = EpochOrder(1, 0)(table).column("order").to_pylist()
    halves = (EpochOrder(1, 0)(table.slice(0, 20)).column("order").to_pylist()
              + EpochOrder(1, 0)(table.slice(20)).column("order").to_pylist())
    assert whole == halves  # the block layout does not matter
    assert whole != EpochOrder(1, 1)(table).column("order").to_pylist()
    assert whole != EpochOrder(2, 0)(table).column("order").to_pylist()
    assert len(set(whole)) == 50
    ints = pa.table({"id": list(range(5))})
    assert EpochOrder(1, 0)(ints).column("order").to_pylist() == EpochOrder(1, 0)(
        pa.table({"id": [str(i) for i in range(5)]})).column("order").to_pylist()


def test_step_seeds_differ_by_rank_and_step_and_repeat():
    seeds = {step_seed(42, rank, step) for rank in range(2) for step in range(1, 50)}
    assert len(seeds) == 98
    # "Independent of restarts": a restarted worker is a new process with its own global RNG
    # state and its own str-hash salt. Golden values, recorded in a separate process
    # (PYTHONHASHSEED=7): a seed drawn from the global RNG, hash() of a str or the pid would
    # not give them. Integer hashing (numpy's SeedSequence): the same on every CPU.
    torch.manual_seed(123)
    np.random.seed(123)
    random.seed(123)
    assert (step_seed(42, 0, 1), step_seed(42, 1, 7)) == (1896493428, 2737586632)


def schedule_lrs(total: int, warmup: int) -> list[float]:
    optimizer = torch.optim.AdamW([torch.nn.Parameter(torch.zeros(1))], lr=1e-3)
    scheduler = linear_schedule(optimizer, total, warmup)
    lrs = []
    for _ in range(total):
        lrs.append(scheduler.get_last_lr()[0])  # the lr of this optimizer step
        optimizer.step()
        scheduler.step()
    return lrs + [scheduler.get_last_lr()[0]]


def test_linear_schedule_decays_to_zero_at_the_runs_last_step():
    # worked by hand: 4 steps, no warm-up: 1e-3 * (4 - s) / 4
    assert np.allclose(schedule_lrs(4, 0), [1e-3, 7.5e-4, 5e-4, 2.5e-4, 0.0])
    # 6 steps, 2 of warm-up: s / 2 for s < 2, then (6 - s) / 4
    assert np.allclose(schedule_lrs(6, 2), [0.0, 5e-4, 1e-3, 7.5e-4, 5e-4, 2.5e-4, 0.0])


def test_max_steps_ends_the_schedule_and_warmup_is_a_share_of_the_run(tmp_path):
    """The documented rule: --max-steps caps the run, and the linear decay reaches 0 at its
    last step; --warmup-ratio is a share of those steps."""
    folder = str(write_views(tmp_path / "views", 100))
    config = config_of(TrainConfig, input=folder, batch_size=16, epochs=3, max_steps=7, warmup_ratio=0.3)
    plan = inspect_input(config)
    assert plan.total_steps == 7
    assert plan.warmup_steps(config.warmup_ratio) == 3  # ceil(0.3 * 7)


def test_gradient_is_clipped_to_max_norm_before_the_step():
    torch.manual_seed(0)
    model = torch.nn.Linear(8, 4)
    inputs = torch.randn(16, 8) * 100  # a gradient far above norm 1
    optimizer = torch.optim.SGD(model.parameters(), lr=1.0)
    before = [p.detach().clone() for p in model.parameters()]
    loss = model(inputs).pow(2).sum()
    reference = torch.autograd.grad(loss, list(model.parameters()), retain_graph=True)
    norm = torch.sqrt(sum(g.pow(2).sum() for g in reference))
    reported = clipped_step(model, loss, optimizer, None, max_grad_norm=1.0)
    assert reported == pytest.approx(float(norm), rel=1e-5)  # the norm before clipping
    # SGD with lr 1: the update is the clipped gradient, reference * 1 / norm (clip_grad_norm_
    # adds 1e-6 to the norm, hence the tolerance)
    for old, new, grad in zip(before, model.parameters(), reference, strict=True):
        assert torch.allclose(old - new.detach(), grad / norm, rtol=1e-4, atol=1e-7)
    step = sum((o - n.detach()).pow(2).sum() for o, n in zip(before, model.parameters(),
                                                              strict=True))
    assert float(step.sqrt()) == pytest.approx(1.0, rel=1e-4)


def test_contrastive_model_is_the_encoders_pooling_plus_a_train_time_mlp(tokenizer):
    encoder = make_tiny_bert(tokenizer.vocab_size)
    with_mlp = ContrastiveModel(encoder, "cls_before_pooler", mlp=True).eval()
    bare = ContrastiveModel(encoder, "cls_before_pooler", mlp=False).eval()
    assert not any(p.requires_grad for p in encoder.pooler.parameters())  # not in the loss
    assert ContrastiveModel(make_tiny_bert(tokenizer.vocab_size), "cls").encoder.pooler.dense.weight \
        .requires_grad
    texts = ["A man plays a guitar.", "Nobody came."]
    reference = encoder_of(EncoderConfig(pooling="cls_before_pooler"), model=encoder,
                                tokenizer=tokenizer)
    tokens = tokenizer(texts, padding=True, return_tensors="pt")
    with torch.no_grad():
        plain = bare(tokens["input_ids"], tokens["attention_mask"])
        projected = with_mlp(tokens["input_ids"], tokens["attention_mask"])
    assert torch.allclose(plain, torch.from_numpy(reference.encode(texts)), atol=1e-6)
    assert torch.allclose(projected, with_mlp.mlp(plain), atol=1e-6)
    assert projected.shape == (2, 32)


def test_the_mlp_starts_as_simcses_unless_told_pytorchs_default(tokenizer, tiny_model_dir):
    """SimCSE's cl_init runs BERT's _init_weights on its MLP: weights ~ N(0, the encoder's
    initializer_range), zero bias. --mlp-init torch keeps nn.Linear's own (the study's runs)."""
    encoder = make_tiny_bert(tokenizer.vocab_size)
    encoder.config.initializer_range = 0.07  # not the 0.02 fallback: the encoder's own is read
    simcse = ContrastiveModel(encoder, "cls_before_pooler").mlp[0]
    default = ContrastiveModel(encoder, "cls_before_pooler", mlp_init="torch").mlp[0]
    # 32 x 32 weights: a sample std is within ~2% (1/sqrt(2n)) of the true one, 15% is 7 times it
    assert torch.count_nonzero(simcse.bias) == 0
    assert float(simcse.weight.std()) == pytest.approx(0.07, rel=0.15)
    bound = 1 / 32 ** 0.5  # PyTorch's Linear: weights and bias ~ U(-1/sqrt(in), 1/sqrt(in))
    assert float(default.weight.abs().max()) <= bound
    assert float(default.weight.std()) == pytest.approx(bound / 3 ** 0.5, rel=0.15)
    assert torch.count_nonzero(default.bias) == 32
    # the job builds its model with the configured init
    config, encoder = plan_run(config_of(TrainConfig, model=str(tiny_model_dir),
                                         pooling="cls_before_pooler", mlp=True))
    assert config.mlp_init == "simcse"
    job_simcse = build_model(encoder, dropout=config.dropout, mlp=True).mlp[0]
    job_torch = build_model(encoder, dropout=config.dropout, mlp=True,
                            mlp_init="torch").mlp[0]
    assert torch.count_nonzero(job_simcse.bias) == 0 and torch.count_nonzero(job_torch.bias) == 32
    assert float(job_simcse.weight.std()) == pytest.approx(0.02, rel=0.15)
    with pytest.raises(ValueError, match="mlp_init must be one of simcse, torch, got 'xavier'"):
        config_of(TrainConfig, mlp_init="xavier")


def test_ditto_pooling_trains_through_the_same_fast_path(tokenizer):
    encoder = make_tiny_bert(tokenizer.vocab_size)
    model = ContrastiveModel(encoder, "ditto", head="1-2", mlp=False)
    assert model.pooled.fast_ditto and model.pooled.layer_head == (1, 2)
    tokens = tokenizer(["A man plays a guitar.", "Nobody came."], padding=True,
                       return_tensors="pt")
    # a random read-out, not .sum(): the last LayerNorm makes every row's sum nearly constant
    readout = torch.randn(2, 32, generator=torch.Generator().manual_seed(0))
    (model(tokens["input_ids"], tokens["attention_mask"]) * readout).sum().backward()
    # The reference: the same weights on eager attention, the diagonal read from the attention
    # maps and differentiated through them. The fast path recomputes the diagonal from the
    # layer's query/key weights; a diagonal cut from the graph would still leave a gradient on
    # them (through the attention output), but one about 0.4 away in places.
    eager = make_tiny_bert(tokenizer.vocab_size, attn_implementation="eager")
    reference = PooledEncoder(eager, "ditto", head="1-2", ditto_impl="eager")
    assert not reference.fast_ditto
    (reference(tokens["input_ids"], tokens["attention_mask"]) * readout).sum().backward()
    # float32, SDPA against the eager softmax (sums in another order): about 1e-7 apart here
    for name in ("query", "key"):
        fast_weight = getattr(encoder.encoder.layer[1].attention.self, name).weight
        eager_weight = getattr(eager.encoder.layer[1].attention.self, name).weight
        torch.testing.assert_close(fast_weight.grad, eager_weight.grad, rtol=1e-4, atol=1e-6)


def read_out_of(model: str) -> tuple[str | None, str | None]:
    facts = model_facts(resolve_model(model))
    return facts.pooling, facts.head


def test_model_directories_name_their_pooling(tmp_path, tiny_model_dir):
    assert read_out_of("all-MiniLM-L6-v2") == ("last_avg", None)  # ST 1_Pooling: mean
    folder = shutil.copytree(tiny_model_dir, tmp_path / "m")
    assert read_out_of(str(folder)) == (None, None)  # declares none
    (folder / "sentray.json").write_text(json.dumps({"pooling": "ditto", "head": "0-3"}))
    assert read_out_of(str(folder)) == ("ditto", "0-3")


# -- Ray Train: 2 CPU workers, gloo -------------------------------------------------------------


def tiny_run_config(tmp_path: Path, model_dir: Path, data: Path, data_dir: Path, **fields):
    base = dict(input=str(data), output=str(tmp_path), model=str(model_dir), workers=2,
                batch_size=16, epochs=1, eval_steps=6, lr=5e-4, eval_batch_size=128, seed=7,
                data_dir=str(data_dir), log_steps=100, max_failures=1)
    return plan_run(config_of(TrainConfig, **{**base, **fields}))[0]


@pytest.fixture(scope="module")
def views(tmp_path_factory) -> Path:
    # 192 rows, one epoch of 12 steps: each epoch costs a Ray Data sort (about 10 s here)
    folder = write_views(tmp_path_factory.mktemp("views"), 192)
    # what jobs/augment.py records beside its rows (the run's summary carries it)
    write_settings(storage.locate(str(folder)), VIEW_SETTINGS, "augment")
    return folder


@pytest.fixture(scope="module")
def clean_run(ray_cluster, tmp_path_factory, tiny_model_dir, views, data_dir):
    output = tmp_path_factory.mktemp("clean")
    # dropout 0.5: a dev score taken with dropout on would be far from the exported model's
    config = tiny_run_config(output, tiny_model_dir, views, data_dir, dropout=0.5)
    return config, run_training(config)


@pytest.mark.long
@pytest.mark.ray
@pytest.mark.slow
@pytest.mark.parametrize("sort_rows", [200_000, 40], ids=["one-partition", "distributed-sort"])
def test_an_epoch_reads_in_its_hash_order_across_files_and_blocks(ray_cluster, tmp_path,
                                                                  monkeypatch, sort_rows):
    """Whichever way an epoch is ordered — in the driver when it is one sort partition, or by
    Ray Data's distributed sort (90 rows in partitions of 40: three read blocks, three sort
    partitions) — the ids come out of Ray Data in the order of their (seed, epoch, id) hashes,
    worked out here in one table, though the rows sit in three files."""
    import hashlib

    from sentray.contrastive import input_data

    monkeypatch.setattr(input_data, "SORT_ROWS", sort_rows)
    ids = [f"doc{i}" for i in range(90)]
    folder = tmp_path / "views"
    folder.mkdir()
    for part in range(3):  # three files, so several blocks reach the sort
        chunk = ids[part * 30:(part + 1) * 30]
        pq.write_table(pa.table({"id": chunk, "text": chunk, "backbone_text": chunk,
                                 "pruned_text": chunk}), folder / f"part-{part}.parquet")
    config = config_of(TrainConfig, input=str(folder), seed=3)
    epochs = epoch_datasets(config, 2, rows=len(ids))

    def expected(epoch: int) -> list[str]:  # blake2b-64 of "seed:epoch:id", little-endian
        key = {i: int.from_bytes(hashlib.blake2b(f"3:{epoch}:{i}".encode(), digest_size=8)
                                 .digest(), "little") for i in ids}
        return sorted(ids, key=key.get)

    # the distributed sort of one epoch costs ~10 s here: epoch 1 only (its salt is not 0's)
    for epoch in (0, 1) if sort_rows >= len(ids) else (1,):
        rows = epochs[f"epoch_{epoch}"].take_all()
        assert [row["text"] for row in rows] == expected(epoch)
        assert set(rows[0]) == {"text", "backbone_text", "pruned_text"}
    assert expected(0) != expected(1)


@pytest.mark.ray
@pytest.mark.slow
def test_two_worker_run_learns_stays_in_sync_and_exports(clean_run, tokenizer):
    config, summary = clean_run
    history = summary["history"]
    assert [r["step"] for r in history] == [6, 12] and summary["steps"] == 12
    assert history[-1]["loss"] < history[0]["loss"]
    # DDP kept the replicas identical. Exact: the all-reduce hands every rank the same gradient
    # bits, and both ranks run the same kernels on one machine (mixed CPUs could differ).
    assert all(r["param_spread"] == 0.0 for r in history)
    assert summary["best_stsb_dev"] == max(r["stsb_dev"] for r in history)
    # every Y of write_views has a 3-word backbone, short enough to stay whole
    assert summary["backbone_coverage"] == {"rows": 192, "rows_with_backbone": 192,
                                            "backbone_whole": 192, "backbone_whole_share": 1.0,
                                            "input_rows": 192}
    assert all(r["backbone_whole_share"] == 1.0 for r in history)
    assert all(r["matmul_dtype"] == "float32" for r in history)  # no autocast asked, none ran
    assert summary["schedule"] == {"warmup_steps": 0, "decay_to_zero_at_step": 12,
                                   "max_grad_norm": 1.0}
    assert summary["input_settings"] == VIEW_SETTINGS  # which Z rule its views were made by
    output = Path(config.output)
    best = output / "best"
    assert json.loads((best / "sentray.json").read_text())["pooling"] == "cls_before_pooler"
    assert read_out_of(str(best)) == ("cls_before_pooler", None)
    ours = encoder_of(EncoderConfig(model=str(best), pooling="cls_before_pooler"))
    texts = ["A man plays a guitar.", "The jury said nothing."]
    from sentence_transformers import SentenceTransformer

    st = SentenceTransformer(str(output / "best-st"), device="cpu")
    assert np.allclose(st.encode(texts), ours.encode(texts), atol=1e-5)
    assert json.loads((output / "summary.json").read_text())["best_step"] == summary["best_step"]
    # one max_length, written once and read by every loader (it was 512 for best/ and 256 for
    # best-st/ with the packaged model)
    recorded = json.loads((best / "sentray.json").read_text())["max_length"]
    assert ours.max_length == st.max_seq_length == recorded


@pytest.mark.ray
@pytest.mark.slow
def test_dev_scores_during_training_are_the_exported_models(clean_run, data_dir):
    """Trained with dropout 0.5, the STS-B dev score reported during training equals the score
    of the exported checkpoint, reloaded in another process's encoder (dropout off), and the
    step-0 score equals the initial model's. Tolerance 0.01 (Spearman x 100): the same weights
    scored with other batch sizes and threads differ by float rounding only; dropout left on
    moved the score by tens of points."""
    from sentray.evaluation import senteval
    from sentray.evaluation.sts import score_pairs

    config, summary = clean_run
    dev = senteval.load_sts_benchmark(data_dir, "dev")
    exported = encoder_of(EncoderConfig(model=str(Path(config.output) / "best"),
                                             pooling="cls_before_pooler"))
    assert score_pairs(exported, dev) == pytest.approx(summary["best_stsb_dev"], abs=0.01)
    initial = encoder_of(EncoderConfig(model=config.encoder.model, pooling="cls_before_pooler"))
    assert score_pairs(initial, dev) == pytest.approx(summary["initial_stsb_dev"], abs=0.01)


@pytest.mark.long
@pytest.mark.ray
@pytest.mark.slow
def test_a_lost_node_restarts_the_run_from_its_checkpoint(ray_cluster, tmp_path, tiny_model_dir,
                                                         views, data_dir):
    """The worker node hosting one Ray Train worker is killed after the first checkpoint; the
    worker group restarts from the last checkpoint on the resources left, and the run ends with
    all its steps, its workers in sync. (A fresh node replaces the lost one afterwards, for the
    tests that follow: Ray starts nodes from the main thread only.)"""
    import threading
    import time

    config = tiny_run_config(tmp_path, tiny_model_dir, views, data_dir, epochs=4)  # 48 steps
    run_folder = tmp_path / config.name
    killed: list[int] = []

    def kill_after_the_first_checkpoint():
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline and not list(run_folder.glob("checkpoint_*")):
            time.sleep(0.05)
        hosts = ray_cluster.processes_named("RayTrainWorker")
        if hosts:
            killed.append(min(hosts))
            ray_cluster.kill_worker(min(hosts), replace=False)

    killer = threading.Thread(target=kill_after_the_first_checkpoint, daemon=True)
    killer.start()
    try:
        summary = run_training(config)
    finally:
        killer.join(10)
        ray_cluster.replace_lost()
    assert killed, "no node hosted a training worker"
    assert summary["steps"] == 48
    assert [r["step"] for r in summary["history"]] == list(range(6, 49, 6))
    assert all(r["param_spread"] == 0.0 for r in summary["history"])  # in sync after it


@pytest.mark.long
@pytest.mark.ray
@pytest.mark.slow
def test_killed_worker_resumes_from_its_checkpoint_to_the_same_result(clean_run, tmp_path):
    """Worker 1 dies at step 8; the group restarts from the step-6 checkpoint and ends with the
    parameters of the run that never failed (same seed, same worker count)."""
    config, clean = clean_run
    # Exact, as docs/jobs/train.md's reproducibility rule says: same seed, worker count and
    # threads, the same machine (the same kernels on the same batches); across CPUs it would not
    # hold.
    faulty = with_flags(config, output=str(tmp_path), fail_at_step=8)
    summary = run_training(faulty)
    assert (tmp_path / faulty.name / "fault-drill-8").is_file()  # the worker did die
    assert [r["param_checksum"] for r in summary["history"]] == [
        r["param_checksum"] for r in clean["history"]]
    assert [r["loss"] for r in summary["history"]] == [r["loss"] for r in clean["history"]]
    a = load_file(Path(config.output) / "best" / "model.safetensors")
    b = load_file(tmp_path / "best" / "model.safetensors")
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


@pytest.mark.long
@pytest.mark.ray
@pytest.mark.slow
def test_rerunning_a_run_name_resumes_it(clean_run, tmp_path):
    config, clean = clean_run
    longer = with_flags(config, epochs=2)  # same name and output: resume
    summary = run_training(longer)
    steps = [r["step"] for r in summary["history"]]
    assert steps == [6, 12, 18, 24]  # 6 and 12 restored from the first run, 13-24 trained
    assert summary["history"][:2] == clean["history"]
    best = Path(config.output) / "best" / "model.safetensors"
    exported = load_file(best)
    best.unlink()

    import ray.train.torch

    def must_not_run(*args, **kwargs):
        raise AssertionError("a finished run started Ray Train again")

    with pytest.MonkeyPatch.context() as patch:  # complete: nothing left to train
        patch.setattr(ray.train.torch, "TorchTrainer", must_not_run)
        again = run_training(longer)
    assert again["history"] == summary["history"] and again["best_step"] == summary["best_step"]
    # the same checkpoint exported again: files copied, no arithmetic, so bit for bit
    reexported = load_file(best)
    assert exported.keys() == reexported.keys()
    assert all(torch.equal(exported[k], reexported[k]) for k in exported)


def test_evaluate_job_reads_an_exported_models_pooling(tmp_path, tiny_model_dir, data_dir):
    """jobs/evaluate.py --model DIR uses the pooling DIR's sentray.json names."""
    from conftest import load_job

    model_dir = tmp_path / "exported"
    import shutil

    shutil.copytree(tiny_model_dir, model_dir)
    (model_dir / "sentray.json").write_text(json.dumps({"pooling": "cls_before_pooler"}))
    evaluate = load_job("evaluate")
    evaluate.main(["--model", str(model_dir), "--tasks", "STSB", "--data-dir", str(data_dir),
                   "--output", str(tmp_path / "eval")])
    config = json.loads((tmp_path / "eval" / "config.json").read_text())
    assert config["pooling"] == "cls_before_pooler"


# what the encoder's first Linear returns under each --precision: autocast's dtype, or fp32
MATMUL_DTYPES = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16"}


def check_amp_run(tmp_path: Path, model_dir: Path, views: Path, data_dir: Path,
                  precision: str, use_gpu: bool) -> None:
    """One worker, one epoch of `views` under autocast: the run's 12 steps (192 rows in global
    batches of 16, evaluated at 6 and 12, as the 2-worker run on the same rows), finite
    losses, the encoder's matmuls in the precision asked for at every report, the export."""
    config = tiny_run_config(tmp_path, model_dir, views, data_dir, workers=1, use_gpu=use_gpu,
                             precision=precision, epochs=1)
    summary = run_training(config)
    history = summary["history"]
    assert summary["steps"] == 12 and [r["step"] for r in history] == [6, 12]
    assert all(np.isfinite(r["loss"]) for r in history)
    assert [r["matmul_dtype"] for r in history] == [MATMUL_DTYPES[precision]] * 2
    assert (tmp_path / "best" / "model.safetensors").is_file()


@pytest.fixture(scope="module")
def gpu_cluster(ray_cluster):
    """The session's Ray cluster with a node that offers this machine's GPU (the loopback
    cluster's nodes offer none, and a GPU worker would wait for one forever)."""
    node = ray_cluster.cluster.add_node(num_cpus=2, num_gpus=1, node_ip_address="127.0.0.1")
    ray_cluster.cluster.wait_for_nodes()
    yield ray_cluster
    ray_cluster.cluster.remove_node(node)


@pytest.mark.gpu
@pytest.mark.ray
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("precision", ["fp16", "bf16"])
def test_one_gpu_worker_trains_with_amp(gpu_cluster, tmp_path, tiny_model_dir, views, data_dir,
                                        precision):
    check_amp_run(tmp_path, tiny_model_dir, views, data_dir, precision, use_gpu=True)


@pytest.mark.long
@pytest.mark.ray
@pytest.mark.slow
def test_one_cpu_worker_trains_with_bf16_autocast(ray_cluster, tmp_path, tiny_model_dir, views,
                                                  data_dir):
    """The GPU test's twin on a CPU: bf16 autocast, the same run and checks (fp16 is GPU-only:
    the config refuses it on a CPU)."""
    check_amp_run(tmp_path, tiny_model_dir, views, data_dir, "bf16", use_gpu=False)


def test_weight_decay_skips_biases_and_layer_norms(tokenizer):
    """As the Hugging Face Trainer (SimCSE's and sentence-transformers' trainer) does."""
    model = ContrastiveModel(make_tiny_bert(tokenizer.vocab_size), "last_avg", mlp=True)
    decayed, plain = adamw(model, 1e-5, 0.01).param_groups
    names = {id(p): n for n, p in model.named_parameters()}
    assert decayed["weight_decay"] == 0.01 and plain["weight_decay"] == 0.0
    assert all(names[id(p)].endswith("weight") and "LayerNorm" not in names[id(p)]
               for p in decayed["params"])
    assert all(names[id(p)].endswith("bias") or "LayerNorm" in names[id(p)]
               for p in plain["params"])
    trainable = [p for p in model.parameters() if p.requires_grad]
    assert len(decayed["params"]) + len(plain["params"]) == len(trainable)


def test_job_flags_reach_the_config(exit_message):
    from conftest import load_job

    job = load_job("train")

    def config(*flags):  # as the command line parses it, its encoder planned as a run plans it
        return plan_run(job.parse_config(["--input", "x", *flags])[0])[0]

    default = config()
    assert (default.encoder.pooling, default.mlp, default.max_grad_norm) == ("last_avg", False, 1.0)
    assert (default.dropout, default.lr) == (0.15, 1e-5)  # SIFTER's paper
    assert (config("--objective", "simcse").dropout, config("--objective", "simcse").lr) == (
        0.1, 3e-5)  # SimCSE's paper
    assert config("--objective", "simcse", "--dropout", "0.15").dropout == 0.15
    assert config("--pooling", "cls_before_pooler").mlp is True
    assert config("--pooling", "cls_before_pooler", "--mlp", "false").mlp is False
    assert config("--pooling", "mean", "--mlp").mlp is True
    assert config("--pooling", "cls_before_pooler", "--no-mlp").mlp is False
    assert config("--pooling", "cls_before_pooler", "--mlp", "auto").mlp is True
    assert config("--max-grad-norm", "0").max_grad_norm is None  # 0 turns clipping off
    assert config("--warmup-ratio", "0.1").warmup_ratio == 0.1
    assert config("--lambdas", "1,0,0").lambdas == SifterWeights(1, 0, 0, 0)
    assert config("--lambdas", "1,1,1,0.5").lambdas == SifterWeights(1, 1, 1, 0.5)
    assert job.parse_config(["-v"])[1] is True
    for bad in ("1,1", "1,1,1,1,1", "a,b,c"):
        with pytest.raises(SystemExit) as info:
            config("--lambdas", bad)
        assert "3 or 4 numbers" in exit_message(info)
    with pytest.raises(SystemExit) as info:  # the config's own check
        config("--batch-size", "63", "--workers", "2")
    assert "must be divisible by the number of workers 2" in exit_message(info)


def test_a_rerun_that_changes_the_model_is_refused_one_that_extends_it_is_not(tmp_path,
                                                                              tiny_model_dir):
    """OUTPUT/NAME/_settings.json records what the model depends on; a rerun under the same
    name that changes any of it stops before Ray starts, naming it; more epochs or steps,
    other workers or evaluation settings only extend the run; --overwrite starts afresh."""

    from sentray.contrastive.job import MODEL_SETTINGS
    from sentray.contrastive.job import _claim_run_folder as claim
    from sentray.kit import storage

    config, _ = plan_run(config_of(TrainConfig, input=str(tmp_path / "in"),
                                   output=str(tmp_path / "out"), pooling="mean", mlp=False))

    def _claim_run_folder(config, output, run):  # the run's settings, its encoder planned
        claim(config, plan_run(config)[1], output, run)

    output = storage.locate(config.output)
    run = output.join(config.name)
    _claim_run_folder(config, output, run)
    recorded = json.loads((tmp_path / "out" / "sifter" / "_settings.json").read_text())
    assert set(MODEL_SETTINGS) | {"model_files"} == set(recorded["settings"])
    _claim_run_folder(with_flags(config, epochs=3, max_steps=50, workers=2,
                                          eval_steps=10, keep_checkpoints=2), output, run)
    changes = {"lr": 3e-5, "seed": 1, "lambdas": SifterWeights(1, 0, 0), "dropout": 0.1,
               "batch_size": 32, "warmup_ratio": 0.1, "max_length": 64, "temperature": 0.1,
               "objective": "simcse", "model": str(tiny_model_dir), "input": "other"}
    for key, value in changes.items():
        changed = with_flags(config, **{key: value})
        named = "model_files" if key == "model" else key  # another model: its files differ
        with pytest.raises(ValueError, match=f"{named}: .* \\(stored\\) != .* \\(this run\\)"):
            _claim_run_folder(changed, output, run)
    # a run with the MLP also depends on its init; one recorded before --mlp-init had PyTorch's
    with_mlp = with_flags(config, mlp=True, name="mlp")
    _claim_run_folder(with_mlp, output, output.join("mlp"))
    with pytest.raises(ValueError, match="mlp_init: 'simcse' \\(stored\\) != 'torch'"):
        _claim_run_folder(with_flags(with_mlp, mlp_init="torch"), output,
                          output.join("mlp"))
    old = tmp_path / "out" / "mlp" / "_settings.json"
    record = json.loads(old.read_text())
    del record["settings"]["mlp_init"]
    old.write_text(json.dumps(record))
    _claim_run_folder(with_flags(with_mlp, mlp_init="torch"), output, output.join("mlp"))
    with pytest.raises(ValueError, match="mlp_init: 'torch' \\(stored\\) != 'simcse'"):
        _claim_run_folder(with_mlp, output, output.join("mlp"))
    (tmp_path / "out" / "best").mkdir()
    (tmp_path / "out" / "best" / "model.safetensors").write_bytes(b"old")
    _claim_run_folder(with_flags(config, lr=3e-5, overwrite=True), output, run)
    assert not (tmp_path / "out" / "best").exists()
    assert json.loads((tmp_path / "out" / "sifter" / "_settings.json").read_text())[
        "settings"]["lr"] == 3e-5
