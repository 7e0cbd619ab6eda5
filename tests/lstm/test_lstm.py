"""SIFTER-LSTM: the cell against torch.nn.LSTM (float64, padded batches, gradients), the forced
input gate, the VADER sentiment set, the SST-2 loader, a short training run on a tiny embedding,
the job, and the same loop on Ray Train."""

from __future__ import annotations

import importlib.util
import json
import random
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import config_of
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from sentray.evaluation.senteval import SPLIT_ROWS, load_sst2
from sentray.lstm import lexicon
from sentray.lstm.cell import SifterLSTM, lstm_cell_step
from sentray.lstm.classifier import LSTMClassifier
from sentray.lstm.config import LSTMConfig
from sentray.lstm.data import EncodedSplit, LSTMData, encode_sentences
from sentray.lstm.job import run_lstm
from sentray.lstm.loop import accuracy, l2_penalty, train_loop
from sentray.training.steps import epoch_permutation as epoch_order

needs_vader = pytest.mark.skipif(importlib.util.find_spec("vaderSentiment") is None,
                                 reason="needs the VADER lexicon: pip install vaderSentiment")

E, H, V = 6, 5, 40  # embedding, hidden, vocabulary sizes of the cell tests


@pytest.fixture(autouse=True)
def one_thread():
    """Tiny tensors: a second torch thread only adds synchronisation (on a busy 2-core machine
    it makes the step loop ten times slower)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def twin_lstms(seed: int = 0, sentiment_ids=()) -> tuple[nn.LSTM, SifterLSTM]:
    """An nn.LSTM and a SifterLSTM with the same float64 weights."""
    torch.manual_seed(seed)
    reference = nn.LSTM(E, H, batch_first=True).double()
    sifter = SifterLSTM(E, H, vocab_size=V, sentiment_ids=sentiment_ids).double()
    sifter.load_state_dict(reference.state_dict())
    return reference, sifter


def gradients(module: nn.Module, x: torch.Tensor, loss: torch.Tensor) -> list[torch.Tensor]:
    return list(torch.autograd.grad(loss, [x, *module.parameters()]))


# -- (a) with an empty set, SifterLSTM is nn.LSTM -----------------------------------------------


def test_parameters_have_nn_lstm_names_shapes_and_initialisation():
    torch.manual_seed(3)
    reference = nn.LSTM(E, H, batch_first=True)
    torch.manual_seed(3)
    sifter = SifterLSTM(E, H, vocab_size=V, sentiment_ids=[1, 2])
    assert list(sifter.state_dict()) == list(reference.state_dict())  # the set is not in it
    # exact: one seed, the same uniform_ draws in the same order into the same shapes
    assert all(torch.equal(a, b) for a, b in zip(sifter.state_dict().values(),
                                                 reference.state_dict().values(), strict=True))
    assert "sentiment_table" in dict(sifter.named_buffers())  # moves with .to(device)
    assert sifter.double().sentiment_table.dtype == torch.bool  # .to(dtype) leaves it alone
    with pytest.raises(ValueError, match=r"\[0, 40\)"):
        SifterLSTM(E, H, vocab_size=V, sentiment_ids=[40])


def test_empty_set_equals_nn_lstm_outputs_states_and_gradients():
    reference, sifter = twin_lstms()
    x = torch.randn(4, 7, E, dtype=torch.float64, requires_grad=True)
    ids = torch.randint(0, V, (4, 7))
    weights = torch.randn(4, 7, H, dtype=torch.float64), torch.randn(2, 4, H, dtype=torch.float64)

    out, (h, c) = reference(x)  # h, c: (1, B, H)
    expected = [out, h[0], c[0]]
    expected_grads = gradients(reference, x, (out * weights[0]).sum()
                               + (h[0] * weights[1][0]).sum() + (c[0] * weights[1][1]).sum())
    out, (h, c) = sifter(x, ids)
    ours_grads = gradients(sifter, x, (out * weights[0]).sum() + (h * weights[1][0]).sum()
                           + (c * weights[1][1]).sum())
    for ours, theirs in zip([out, h, c, *ours_grads], [*expected, *expected_grads], strict=True):
        torch.testing.assert_close(ours, theirs, rtol=1e-12, atol=1e-12)


def test_right_padded_batch_equals_nn_lstm_on_packed_sequences():
    reference, sifter = twin_lstms(seed=1)
    lengths = torch.tensor([5, 2, 7, 1])
    x = torch.randn(4, 7, E, dtype=torch.float64, requires_grad=True)
    ids = torch.randint(0, V, (4, 7))
    weights = torch.randn(4, 7, H, dtype=torch.float64), torch.randn(4, H, dtype=torch.float64)

    packed = pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False)
    out, (h, c) = reference(packed)
    out, _ = pad_packed_sequence(out, batch_first=True, total_length=7)  # zeros past the end
    expected = [out, h[0], c[0]]
    expected_grads = gradients(reference, x, (out * weights[0]).sum()
                               + (h[0] * weights[1]).sum() + c[0].sum())
    out, (h, c) = sifter(x, ids, lengths)
    ours_grads = gradients(sifter, x, (out * weights[0]).sum() + (h * weights[1]).sum()
                           + c.sum())
    for ours, theirs in zip([out, h, c, *ours_grads], [*expected, *expected_grads], strict=True):
        torch.testing.assert_close(ours, theirs, rtol=1e-12, atol=1e-12)
    assert torch.all(ours_grads[0][1, 2:] == 0)  # padding gets no gradient


def test_padding_does_not_change_a_row_with_a_real_set():
    _, sifter = twin_lstms(seed=2, sentiment_ids=range(0, V, 3))
    lengths = torch.tensor([6, 3, 1])
    x = torch.randn(3, 6, E, dtype=torch.float64)
    ids = torch.randint(0, V, (3, 6))
    out, (h, c) = sifter(x, ids, lengths)
    for row, length in enumerate(lengths.tolist()):
        alone, (h_row, c_row) = sifter(x[row:row + 1, :length], ids[row:row + 1, :length])
        # A 1-row batch and a 3-row one run their products through differently shaped GEMMs
        # (kernel chosen by shape and CPU): a few float64 ulps apart, not bit for bit. 1e-12 is
        # far below a padded step leaking into the state (which moves it by > 1e-3).
        torch.testing.assert_close(out[row:row + 1, :length], alone, rtol=0, atol=1e-12)
        torch.testing.assert_close(h[row], h_row[0], rtol=0, atol=1e-12)
        torch.testing.assert_close(c[row], c_row[0], rtol=0, atol=1e-12)
        assert torch.all(out[row, length:] == 0)


# -- (b) the forced input gate ------------------------------------------------------------------


def test_forced_rows_take_the_whole_candidate_into_the_cell():
    torch.manual_seed(0)
    batch = 4
    gates_x = torch.randn(batch, 4 * H, dtype=torch.float64, requires_grad=True)
    h, c = torch.randn(batch, H, dtype=torch.float64), torch.randn(batch, H, dtype=torch.float64)
    weight_hh = torch.randn(4 * H, H, dtype=torch.float64)
    force = torch.tensor([True, False, True, False])

    h_t, c_t = lstm_cell_step(gates_x, h, c, weight_hh, force)
    i, f, g, o = (gates_x + h @ weight_hh.T).chunk(4, dim=1)  # nn.LSTM's gate order
    f, g, o = torch.sigmoid(f), torch.tanh(g), torch.sigmoid(o)
    # The cell adds gates_x + h W^T in one addmm, this reference in two ops: float64 results
    # differ by a few ulps, and by how many depends on the CPU's kernels (AVX2 vs AVX-512), so
    # no exact equality. 1e-12 is far below what the checks tell apart: a gate of sigmoid(i) < 1
    # instead of 1 moves c by more than 1e-3 here.
    torch.testing.assert_close(c_t[force], (f * c + g)[force], rtol=0, atol=1e-12)  # i_t = 1
    torch.testing.assert_close(c_t[~force], (f * c + torch.sigmoid(i) * g)[~force], rtol=0,
                               atol=1e-12)
    assert (torch.sigmoid(i) * g - g)[force].abs().max() > 1e-3  # what the first check excludes
    torch.testing.assert_close(h_t, o * torch.tanh(c_t), rtol=0, atol=1e-12)
    (grad,) = torch.autograd.grad(c_t.sum(), gates_x)
    assert torch.all(grad[force, :H] == 0)  # no gradient into a short-circuited gate
    assert torch.all(grad[~force, :H] != 0)

    cell = nn.LSTMCell(E, H).double()  # no forcing: exactly the LSTM cell
    x = torch.randn(batch, E, dtype=torch.float64)
    expected = cell(x, (h, c))
    ours = lstm_cell_step(x @ cell.weight_ih.T + cell.bias_ih + cell.bias_hh, h, c,
                          cell.weight_hh, torch.zeros(batch, dtype=torch.bool))
    for a, b in zip(ours, expected, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-12)


def test_the_set_forces_the_gate_only_at_its_tokens():
    _, sifter = twin_lstms(seed=4, sentiment_ids=[7])
    reference, _ = twin_lstms(seed=4)
    x = torch.randn(2, 4, E, dtype=torch.float64)
    # Our cell against nn.LSTM's own kernels: float64 sums in another order, a few ulps apart
    # on any CPU (by how many depends on its kernels), hence 1e-12 and not equality; a forced
    # gate moves the outputs by more than 1e-3 (the last check).
    without = torch.tensor([[1, 2, 3, 4], [5, 6, 8, 9]])
    torch.testing.assert_close(sifter(x, without)[0], reference(x)[0], rtol=0, atol=1e-12)
    with_seven = torch.tensor([[1, 2, 3, 4], [5, 6, 7, 9]])
    out = sifter(x, with_seven)[0]
    torch.testing.assert_close(out[0], reference(x)[0][0], rtol=0, atol=1e-12)
    torch.testing.assert_close(out[1, :2], reference(x)[0][1, :2], rtol=0, atol=1e-12)
    assert (out[1, 2:] - reference(x)[0][1, 2:]).abs().max() > 1e-3


# -- (c) the sentiment set ----------------------------------------------------------------------


def vaders_own_lexicon() -> dict[str, float]:
    """The lexicon as VADER's own analyser reads it (a later duplicate line wins: 7,520 lines,
    7,506 entries; "ok" is 1.6 on line 352 and 1.2 on line 4895)."""
    from vaderSentiment.vaderSentiment import SentimentIntensityAnalyzer

    return SentimentIntensityAnalyzer().lexicon


def naive_sentiment_words(vader: dict[str, float], threshold: float) -> set[str]:
    """The module's rule written another way: a word is letters only, with single inner
    apostrophes or hyphens ("don't", "well-made"); no regular expression."""
    def is_word(entry: str) -> bool:
        return all(part.isalpha() for part in entry.replace("'", "-").split("-"))

    return {entry for entry, valence in vader.items()
            if abs(valence) >= threshold and is_word(entry)}


def naive_token_ids(words: set[str], tokenizer) -> set[int]:
    """A word is one WordPiece when it is itself a vocabulary entry (the uncased vocabulary:
    every VADER word is lower case): looked up, not tokenized."""
    vocab, special = tokenizer.get_vocab(), set(tokenizer.all_special_ids)
    return {vocab[w] for w in words if w in vocab and vocab[w] not in special}


@needs_vader
def test_vader_lexicon_and_threshold():
    vader = lexicon.load_vader_lexicon()
    assert vader == vaders_own_lexicon()  # 7,506 entries, duplicates resolved as VADER does
    assert (vader["good"], vader["bad"], vader["okay"], vader["like"]) == (1.9, -2.5, 0.9, 1.5)
    words = lexicon.sentiment_words(vader)  # default threshold 1.5
    assert {"good", "bad", "like", "charming", "dull", "heartbreaking"} <= words
    assert not {"okay", "boring", "no", "ok"} & words  # |valence| < 1.5 ("ok": its last line)
    assert not {":)", ":-D", "143", "fed up", "can't stand"} & words  # not words
    assert "good" not in lexicon.sentiment_words(vader, 2.0)
    assert "okay" in lexicon.sentiment_words(vader, 0.5)
    for threshold in (0.5, 1.5, 2.0):
        assert lexicon.sentiment_words(vader, threshold) == naive_sentiment_words(vader,
                                                                                  threshold)
    assert len(words) == 4031  # the module docstring's count, now counted by the naive rule
    with pytest.raises(ValueError, match="VADER"):
        lexicon.sentiment_words(vader, 5.0)


def test_missing_vader_package_names_the_install(monkeypatch):
    monkeypatch.setattr(lexicon, "VADER_PACKAGE", "no_such_vader_package")
    with pytest.raises(FileNotFoundError, match="pip install vaderSentiment"):
        lexicon.load_vader_lexicon()


def test_token_ids_are_single_piece_words_only(tokenizer, caplog):
    words = {"good", "bad", "heartbreaking", "[UNK]", "[CLS]"}
    with caplog.at_level("INFO", logger="sentray.lstm.lexicon"):
        ids = lexicon.sentiment_token_ids(words, tokenizer)
    assert ids == set(tokenizer.convert_tokens_to_ids(["good", "bad"]))
    assert len(tokenizer.tokenize("heartbreaking")) > 1  # skipped: several pieces
    assert "5 -> 2 token ids; 1 words skipped as several word pieces, 2 as a special token" \
        in caplog.text


@needs_vader
def test_default_set_for_the_packaged_tokenizer(tokenizer):
    words = lexicon.sentiment_words(lexicon.load_vader_lexicon())
    ids = lexicon.sentiment_token_ids(words, tokenizer)
    assert ids == naive_token_ids(words, tokenizer)
    assert len(ids) == 1362  # the module docstring's count, now found by vocabulary lookup
    assert not ids & set(tokenizer.all_special_ids)
    assert tokenizer.convert_tokens_to_ids("good") in ids
    assert tokenizer.convert_tokens_to_ids("the") not in ids


# -- (d) SST-2 ----------------------------------------------------------------------------------


def test_sst2_splits_have_senteval_counts(data_dir):
    for split, rows in SPLIT_ROWS.items():
        data = load_sst2(data_dir, split)
        assert len(data) == len(data.labels) == rows
        assert set(np.unique(data.labels)) == {0, 1}
    dev = load_sst2(data_dir.parent, "dev")  # a folder holding senteval/ works too
    assert dev.sentences[0] == "it 's a charming and often affecting journey ."
    assert dev.labels[0] == 1 and len(dev.head(10)) == 10


def test_sst2_errors_name_the_missing_piece(tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        load_sst2(tmp_path / "missing", "train")
    with pytest.raises(FileNotFoundError, match=r"SST/binary/sentiment-dev"):
        load_sst2(tmp_path, "dev")
    with pytest.raises(ValueError, match="split"):
        load_sst2(tmp_path, "validation")
    bad = tmp_path / "SST" / "binary"
    bad.mkdir(parents=True)
    (bad / "sentiment-test").write_text("fine film\t1\nno label here\n")
    with pytest.raises(ValueError, match="line 2"):
        load_sst2(tmp_path, "test")


# -- (e) the classifier and the loop ------------------------------------------------------------


def test_encoding_has_no_special_tokens_truncates_and_pads_right(tokenizer, data_dir):
    dev = load_sst2(data_dir, "dev").head(2)
    encoded = encode_sentences(tokenizer, dev, max_length=6)
    assert tokenizer.convert_ids_to_tokens(encoded.ids[0].tolist()) == [
        "it", "'", "s", "a", "charming", "and"]  # no [CLS], cut at 6
    long = encode_sentences(tokenizer, dev, max_length=64)
    assert long.lengths.tolist() == [10, 8] and long.ids.shape == (2, 10)
    assert tokenizer.convert_ids_to_tokens(long.ids[0, -1:].tolist()) == ["."]  # no [SEP]
    assert long.ids[1, 8:].tolist() == [tokenizer.pad_token_id] * 2
    ids, lengths, labels = long.batch(np.array([1]))
    assert ids.shape == (1, 8) and lengths.tolist() == [8] and labels.tolist() == [0]
    empty = encode_sentences(tokenizer, dev.__class__("x", [" "], np.array([1])), 64)
    assert empty.ids.tolist() == [[tokenizer.unk_token_id]]  # the LSTM needs a token


def test_classifier_cells_start_equal_and_padding_is_invisible(tokenizer):
    weight = torch.randn(tokenizer.vocab_size, 8)
    torch.manual_seed(0)
    plain = LSTMClassifier(weight, cell="lstm").eval()
    torch.manual_seed(0)
    sifter = LSTMClassifier(weight, cell="sifter").eval()
    assert plain.rnn.hidden_size == 4 and plain.classifier.out_features == 2
    # exact: one seed, the same draws in the same order (no arithmetic to round)
    assert all(torch.equal(a, b) for a, b in zip(plain.state_dict().values(),
                                                 sifter.state_dict().values(), strict=True))
    ids = torch.randint(1000, 2000, (3, 6))
    lengths = torch.tensor([6, 2, 4])
    padded = ids.clone()
    padded[1, 2:] = 0
    padded[2, 4:] = 0
    with torch.no_grad():
        for model in (plain, sifter):
            torch.testing.assert_close(model(ids, lengths), model(padded, lengths))
        torch.testing.assert_close(plain(ids, lengths), sifter(ids, lengths), rtol=1e-5,
                                   atol=1e-6)
    with pytest.raises(ValueError, match="sifter cell only"):
        LSTMClassifier(weight, cell="lstm", sentiment_ids=[5])
    with pytest.raises(ValueError, match="cell"):
        LSTMClassifier(weight, cell="gru")


@pytest.mark.parametrize("fields, message", [
    ({"cell": "gru"}, "cell"),
    ({"batch_size": 30, "workers": 4}, "divisible"),
    ({"dropout": 1.0}, "dropout"),
    ({"lexicon_threshold": 4.5}, "VADER"),
    ({"max_steps": 0}, "max_steps"),
    ({"workers": -1}, "workers"),
    ({"l2": -1.0}, "l2"),
])
def test_bad_config_is_rejected(fields, message):
    with pytest.raises(ValueError, match=message):
        config_of(LSTMConfig, **fields)


# SIFTER, SST-2 setup (../shared/papers/sifter.txt, the section the paper calls 5.4): "The
# dimensionality of the input word vector is 768, and the SIFTER-LSTM hidden layer has 384
# dimensions. The word vector layer and the LSTM layer are dropped out with a probability of
# 0.2. Our model is trained using the Adam optimizer with a learning rate of 1e-5 and a
# min-batch size of 32. The model parameters use an L2 penalty with a factor of 1e-7. During
# training, we conduct a validation the development set every 50 training steps". The paper
# names no lexicon, epoch count or seed: those defaults are ours and not checked here.
PAPER = {"dropout": 0.2, "lr": 1e-5, "batch_size": 32, "l2": 1e-7, "eval_steps": 50}


def test_config_defaults_are_the_papers():
    config = LSTMConfig()
    assert {k: getattr(config, k) for k in PAPER} == PAPER
    # the hidden size is half the embedding's: 384 for BERT-base's 768-d WordPiece vectors
    assert LSTMClassifier(torch.zeros(3, 768)).rnn.hidden_size == 384


def test_epoch_order_and_l2():
    # "The same on every worker": each rank's process has its own global RNG state (the loop
    # seeds torch per rank and step), so the order must come from (seed, epoch) alone.
    orders = []
    for rank in range(2):
        torch.manual_seed(rank)
        np.random.seed(rank)
        random.seed(rank)
        torch.rand(rank + 1), np.random.rand(rank + 1), random.random()  # a rank's own draws
        orders.append(epoch_order(1, 0, 50))
    assert orders[0].tolist() == orders[1].tolist()  # integers: exact on any CPU
    assert orders[0].tolist() != epoch_order(1, 1, 50).tolist() != epoch_order(2, 0, 50).tolist()
    assert orders[0].tolist() != list(range(50))  # shuffled
    assert sorted(epoch_order(2, 3, 50)) == list(range(50))
    a, b = nn.Parameter(torch.tensor([1.0, 2.0])), nn.Parameter(torch.tensor([[3.0]]))
    frozen = torch.tensor([10.0])
    assert float(l2_penalty([a, b, frozen]).detach()) == 14.0  # 1 + 4 + 9: exact integers


@pytest.fixture(scope="module")
def tiny_data(tokenizer, data_dir) -> LSTMData:
    """96 SST-2 dev sentences as train, dev and test, their word pieces renumbered into a tiny
    vocabulary (only the pieces they use) with a random 16-d embedding."""
    encoded = encode_sentences(tokenizer, load_sst2(data_dir, "dev").head(96), 64)
    pieces, tiny_ids = np.unique(encoded.ids, return_inverse=True)
    encoded = EncodedSplit("tiny", tiny_ids.reshape(encoded.ids.shape), encoded.lengths,
                           encoded.labels)
    sentiment = [int(np.searchsorted(pieces, tokenizer.convert_tokens_to_ids(word)))
                 for word in ("good", "bad", "charming") if
                 tokenizer.convert_tokens_to_ids(word) in pieces]
    assert len(sentiment) == 3
    torch.manual_seed(0)
    return LSTMData(encoded, encoded, encoded, torch.randn(len(pieces), 16), tuple(sentiment), 3)


@pytest.mark.parametrize("cell", ["lstm", "sifter"])
def test_short_training_lowers_the_loss_and_repeats(tiny_data, cell):
    data = tiny_data if cell == "sifter" else LSTMData(
        tiny_data.train, tiny_data.dev, tiny_data.test, tiny_data.embeddings, (), 0)
    config = config_of(LSTMConfig, cell=cell, batch_size=16, lr=1e-2, epochs=8, eval_steps=6, seed=3,
                        dropout=0.0, log_steps=1000)
    metrics = train_loop(config, data)
    history = metrics["history"]
    assert metrics["steps"] == 48 and [r["step"] for r in history] == list(range(6, 49, 6))
    assert history[-1]["loss"] < 0.5 * history[0]["loss"]
    assert metrics["dev_accuracy"] == max(r["dev_accuracy"] for r in history) > 0.8
    # the best state was restored before the test score (here test == dev)
    assert metrics["test_accuracy"] == metrics["dev_accuracy"]
    assert metrics["best_step"] == next(r["step"] for r in history
                                        if r["dev_accuracy"] == metrics["dev_accuracy"])
    again = train_loop(config, data)
    # seeded, so the same run twice; exact, as both run in this process with one thread
    # (one_thread) on the same inputs, so through the same kernels
    assert again["history"] == history


def test_other_ranks_train_their_slice_report_and_return_nothing(tiny_data):
    config = config_of(LSTMConfig, cell="sifter", batch_size=16, lr=1e-2, epochs=1, eval_steps=2, seed=3,
                        workers=2, log_steps=1000)
    records: list[dict] = []
    assert train_loop(config, tiny_data, rank=1, world_size=2, report=records.append) is None
    assert [r["step"] for r in records] == [2, 4, 6]  # every rank reports every evaluation
    assert not any("dev_accuracy" in r for r in records)  # rank 0 alone scores dev
    with pytest.raises(ValueError, match="divisible"):
        train_loop(config, tiny_data, rank=0, world_size=3)


def test_accuracy_scores_every_row(tiny_data):
    torch.manual_seed(0)
    model = LSTMClassifier(tiny_data.embeddings, cell="lstm")
    whole = accuracy(model, tiny_data.dev, batch_size=1000)
    assert model.training  # restored
    # the naive count: one sentence at a time, no padding, dropout off
    model.eval()
    correct, margins = 0, []
    with torch.no_grad():
        for row in range(len(tiny_data.dev)):
            ids, lengths, labels = tiny_data.dev.batch(np.array([row]))
            logits = model(ids, lengths)[0]  # (2,)
            correct += int(logits.argmax() == labels[0])
            margins.append(float((logits[0] - logits[1]).abs()))
    model.train()
    # Counts are compared exactly: batch shape and padding move float32 logits by ~1e-6 at
    # most (other GEMM kernels), and no row's two logits are closer than 1e-4, so no argmax
    # can flip on any CPU.
    assert min(margins) > 1e-4
    assert whole == accuracy(model, tiny_data.dev, batch_size=7) == correct / len(tiny_data.dev)


# -- (f) the job --------------------------------------------------------------------------------


def job_args(out: Path, model_dir: Path, data_dir: Path, *extra: str) -> list[str]:
    return ["--model", str(model_dir), "--data-dir", str(data_dir), "--output", str(out),
            "--max-steps", "20", "--eval-steps", "10", "--limit-train", "320",
            "--limit-eval", "64", "--lr", "1e-3", "--seed", "5", *extra]


@needs_vader
def test_job_writes_metrics(tmp_path, tiny_model_dir, data_dir, tokenizer):
    from conftest import load_job

    job = load_job("train_lstm")
    metrics = job.main(job_args(tmp_path, tiny_model_dir, data_dir, "--cell", "sifter"))
    written = json.loads((tmp_path / "metrics.json").read_text())
    assert written == metrics
    for key in ("dev_accuracy", "test_accuracy", "best_step", "steps", "cell", "seed",
                "sentiment_words", "sentiment_token_ids", "seconds", "history"):
        assert key in written, key
    assert (written["cell"], written["seed"], written["steps"]) == ("sifter", 5, 20)
    assert (written["train_rows"], written["dev_rows"], written["test_rows"]) == (320, 64, 64)
    assert [r["step"] for r in written["history"]] == [10, 20]
    words = naive_sentiment_words(vaders_own_lexicon(), 1.5)
    assert (written["sentiment_words"], written["sentiment_token_ids"]) == (
        len(words), len(naive_token_ids(words, tokenizer)))  # tiny_model_dir's tokenizer
    # accuracies are counts over the 64 rows, and the reported dev score is the best evaluated
    assert written["test_accuracy"] * 64 == pytest.approx(round(written["test_accuracy"] * 64))
    assert written["dev_accuracy"] == max(r["dev_accuracy"] for r in written["history"])


def test_job_errors_name_the_problem(tmp_path, tiny_model_dir, exit_message):
    from conftest import load_job

    job = load_job("train_lstm")
    with pytest.raises(SystemExit, match="error: .*does not exist"):
        job.main(job_args(tmp_path, tiny_model_dir, tmp_path / "nowhere", "--cell", "lstm"))
    with pytest.raises(SystemExit) as info:
        job.main(["--batch-size", "31", "--workers", "2"])
    assert "must be divisible by the number of workers 2" in exit_message(info)


# -- Ray Train ----------------------------------------------------------------------------------


@pytest.mark.long
@needs_vader
@pytest.mark.ray
@pytest.mark.slow
def test_ray_train_runs_the_same_loop(tmp_path, tiny_model_dir, data_dir, ray_cluster):
    """One Ray worker reproduces the plain process exactly; two DDP workers train too."""
    base = dict(cell="sifter", model=str(tiny_model_dir), data_dir=str(data_dir), max_steps=20,
                eval_steps=10, limit_train=320, limit_eval=64, lr=1e-3, seed=5, batch_size=16)
    # Exact: one thread here and in the worker (cpus_per_worker 1), the same kernels on the same
    # inputs in two processes of one machine.
    plain = run_lstm(config_of(LSTMConfig, **base, output=str(tmp_path / "plain"), threads=1))
    one = run_lstm(config_of(LSTMConfig, **base, output=str(tmp_path / "one"), workers=1, cpus_per_worker=1))
    keys = ("dev_accuracy", "test_accuracy", "best_step", "history")
    assert {k: one[k] for k in keys} == {k: plain[k] for k in keys}
    two = run_lstm(config_of(LSTMConfig, **base, output=str(tmp_path / "two"), workers=2))
    assert two["steps"] == 20 and [r["step"] for r in two["history"]] == [10, 20]
    assert all(np.isfinite(r["loss"]) for r in two["history"])
    # the summary is the history's: its best step, and accuracies that are counts of 64 rows
    assert two["dev_accuracy"] == max(r["dev_accuracy"] for r in two["history"])
    assert two["best_step"] == max(two["history"], key=lambda r: r["dev_accuracy"])["step"]
    assert two["test_accuracy"] * 64 == pytest.approx(round(two["test_accuracy"] * 64))
    assert json.loads((tmp_path / "two" / "metrics.json").read_text())["best_step"] == \
        two["best_step"]


def test_encoded_split_batches_cut_to_the_longest_row():
    split = EncodedSplit("x", np.array([[5, 6, 0, 0], [7, 0, 0, 0], [8, 9, 10, 0]]),
                         np.array([2, 1, 3]), np.array([1, 0, 1]))
    ids, lengths, labels = split.batch(np.array([0, 1]))
    assert ids.tolist() == [[5, 6], [7, 0]] and lengths.tolist() == [2, 1]
    assert split.batch(slice(0, 3))[0].shape == (3, 3)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_on_gpu_the_set_moves_and_the_cell_matches_cudnn():
    torch.manual_seed(0)
    reference = nn.LSTM(E, H, batch_first=True).cuda()
    sifter = SifterLSTM(E, H, vocab_size=V).cuda()
    sifter.load_state_dict(reference.state_dict())
    assert sifter.sentiment_table.device.type == "cuda"
    lengths = torch.tensor([5, 2, 7])
    x = torch.randn(3, 7, E, device="cuda")
    ids = torch.randint(0, V, (3, 7), device="cuda")
    _, (h, c) = reference(pack_padded_sequence(x, lengths, batch_first=True,
                                               enforce_sorted=False))
    _, (h_ours, c_ours) = sifter(x, ids, lengths.cuda())
    torch.testing.assert_close(h_ours, h[0], rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(c_ours, c[0], rtol=1e-4, atol=1e-5)
    classifier = LSTMClassifier(torch.randn(V, E), cell="sifter", sentiment_ids=[3]).cuda()
    logits = classifier(ids, lengths)  # lengths on the CPU, as the loop passes them
    assert logits.shape == (3, 2) and logits.device.type == "cuda"
