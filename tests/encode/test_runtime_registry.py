"""The runtimes' registry (`sentray.encode.runtimes`): a runtime registered there is probed, planned,
run by the job and recorded in its output like the others, and nobody names it; a process
imports the package of the runtime its plan runs, no other."""

from __future__ import annotations

import json
import subprocess
import sys
import types

import pytest
from conftest import ROOT, load_job

from sentray.encode.config import EncoderConfig
from sentray.encode.runtimes import registry, torch_runtime
from sentray.encode.runtimes.runtime import Runtime
from sentray.precision.plan import Kept, plan_encoder

STAND_IN = "stand-in"


class RememberingForward:
    """torch's forward, each input's result kept: a runtime whose second call of a shape is a
    lookup, so the probe (which times each batch's second call) measures it fastest, with
    torch's very vectors (its exact gate passes)."""

    def __init__(self, plan, model=None, threads=None) -> None:
        self.inner = torch_runtime.build_forward(plan, model, threads)
        self.pooled, self.device, self.seen = self.inner.pooled, self.inner.device, {}

    def autocast(self):
        return self.inner.autocast()

    def __call__(self, input_ids, attention_mask):
        key = (input_ids.numpy().tobytes(), attention_mask.numpy().tobytes())
        if key not in self.seen:
            self.seen[key] = self.inner(input_ids, attention_mask)
        return self.seen[key]


@pytest.fixture
def stand_in():
    registry.register(Runtime(name=STAND_IN, precisions={"fp32": None}, probed=("fp32",),
                              package=None, extra=None, build_forward=RememberingForward))
    yield
    registry.unregister(STAND_IN)


@pytest.fixture
def no_ray(monkeypatch):
    """No Ray connected in this process: the job runs its rows here, where the stand-in is
    registered."""
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    monkeypatch.setitem(sys.modules, "ray", types.SimpleNamespace(is_initialized=lambda: False))


def test_the_registry_answers_for_every_runtime():
    assert registry.names()[:1] == ("torch",)
    assert registry.candidates()[0] == ("torch", "fp32")
    assert {registry.default_runtime(p) for p in ("fp32", "bf16", "fp16")} == {"torch"}
    assert registry.artefact_kind("torch", "fp32") is None
    with pytest.raises(ValueError, match="does not run --precision int8; it runs fp32, bf16"):
        registry.check_runs("torch", "int8")
    with pytest.raises(ValueError, match="no runtime 'tvm'; the runtimes are torch"):
        registry.get("tvm")
    with pytest.raises(ValueError, match="does not run --precision"):
        EncoderConfig(runtime="torch", precision="int8")


def test_a_stand_in_runtime_is_probed_planned_run_and_recorded_like_the_others(
        stand_in, no_ray, tiny_model_dir, tmp_path):
    assert (STAND_IN, "fp32") in registry.candidates()
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("".join(f"Sentence {i} of a corpus, {i % 7} words long.\n"
                              for i in range(3_000)))
    # fp32, runtime auto, 3,000 rows (over the size that pays for measuring): the probe times
    # the exact runtimes on this machine, the stand-in among them, and chooses it
    load_job("embed").main(["--input", str(corpus), "--output", str(tmp_path / "out"),
                            "--model", str(tiny_model_dir), "--pooling", "mean",
                            "--max-length", "64", "--rows-per-batch", "1024"])
    summary = json.loads((tmp_path / "out" / "_summary.json").read_text())
    settings = json.loads((tmp_path / "out" / "_settings.json").read_text())["settings"]
    assert settings["runtime"] == STAND_IN and summary["rows_out"] == 3_000
    encoder = summary["encoder"]
    assert STAND_IN in {m["runtime"] for m in encoder["measured"]}, encoder
    # what the output records is planned again as it is (a rerun, the query encoder)
    plan = plan_encoder(EncoderConfig(model=str(tiny_model_dir), pooling="mean", max_length=64,
                                      device="cpu"),
                        kept=Kept("fp32", settings["runtime"], exact=True))
    assert plan.runtime == STAND_IN


@pytest.mark.parametrize(("runtime", "imported"), [("torch", []),
                                                   ("onnxruntime", ["onnxruntime"])])
def test_a_process_imports_only_the_runtime_its_plan_runs(tiny_model_dir, runtime, imported):
    pytest.importorskip("onnxruntime")
    code = ("import sys\n"
            "from sentray.encode.config import EncoderConfig\n"
            "from sentray.encode.encoder import SentenceEncoder\n"
            "from sentray.precision.plan import plan_encoder\n"
            f"config = EncoderConfig(model={str(tiny_model_dir)!r}, pooling='mean', "
            f"device='cpu', max_length=64, runtime={runtime!r})\n"
            "SentenceEncoder(plan_encoder(config)).encode(['a sentence'])\n"
            "print(sorted(m for m in ('onnxruntime', 'openvino', 'nncf') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=ROOT, check=True)
    assert out.stdout.strip().splitlines()[-1] == str(imported)
