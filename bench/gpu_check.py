"""The GPU path measured in one command, for the first machine with an NVIDIA GPU (issue 12, §4).

    bash bench/gpu_check.sh                  # one GPU; sized for under 8 minutes on an H200
    bash bench/gpu_check.sh --dry-run        # every step on CPU at tiny sizes

Steps, in order; each writes its figures into OUT/gpu_check.json (rewritten after every step)
and OUT/gpu_check.md is rebuilt from that JSON. A step that fails is recorded with its error and
the next one runs; the exit status is 1 when any step failed.

1. gpu_tests: `python -m pytest -q -m gpu` (they skip without CUDA), pass/skip/fail counts.
2. embed: `SentenceEncoder` throughput for mean, fast Ditto and eager Ditto at fp32/fp16/bf16:
   sentences/s end to end (`encode`: tokenize, pad, forward, copy back) and of the forward
   passes alone, real (unpadded) tokens/s, model FLOP/s and its fraction of the GPU's data
   sheet peak and of a matrix product in the same precision measured in the same run.
3. ditto_memory: peak GPU memory of one forward pass of fast vs eager Ditto on a synthetic
   (256, 128) batch.
4. train: steps/s of `jobs/train.py` (SIFTER and SimCSE, global batch 64 and 512, one GPU, bf16)
   on the augmented Brown corpus, each run a subprocess joining one private loopback cluster.

`python bench/gpu_check.py --markdown OUT/gpu_check.json` prints the table again from a JSON.
Relative paths in the options start at the repository root. Away from this machine (no
../shared), pass --corpus and --data-dir; step 4 uses out/brown-aug when it exists.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import importlib.util
import json
import logging
import os
import platform
import select
import shutil
import subprocess
import sys
import time
import traceback
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"
STEPS = ("gpu_tests", "embed", "ditto_memory", "train")
MIB = 2 ** 20

logger = logging.getLogger("gpu_check")

# Dense (no 2:4 sparsity) peak TFLOP/s from NVIDIA's data sheets, as (name substring, fp16/bf16
# tensor cores, tf32 tensor cores, fp32 without tensor cores). First match of
# torch.cuda.get_device_name() wins, so the PCIe/NVL variants come before their SXM names.
PEAK_TFLOPS: tuple[tuple[str, float, float, float], ...] = (
    ("H100 PCIe", 756.0, 378.0, 51.0),
    ("H100 NVL", 835.0, 418.0, 60.0),
    ("H200 NVL", 835.0, 418.0, 60.0),
    ("H100", 989.0, 494.0, 67.0),
    ("H200", 989.0, 494.0, 67.0),
    ("A100", 312.0, 156.0, 19.5),
)

# Sizes per mode; every one can be overridden on the command line.
SIZES = {
    "gpu": {"sentences": 20000, "batch_size": 256, "precisions": "fp32,fp16,bf16", "repeats": 3,
            "memory_batch": 256, "memory_tokens": 128, "train_steps": 60,
            "train_batch_sizes": "64,512", "aug_lines": 5000, "job_timeout": 300},
    "dry": {"sentences": 64, "batch_size": 16, "precisions": "fp32", "repeats": 1,
            "memory_batch": 4, "memory_tokens": 16, "train_steps": 4,
            "train_batch_sizes": "8,16", "aug_lines": 200, "job_timeout": 600},
}


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dry-run", action="store_true",
                        help="every step on CPU at tiny sizes (checks the script, not a GPU)")
    parser.add_argument("--out", default="out/gpu_check",
                        help="folder for gpu_check.json, gpu_check.md, logs (default: "
                             "%(default)s; relative paths start at the repository root)")
    parser.add_argument("--markdown", metavar="JSON", default=None,
                        help="print the markdown of an existing gpu_check.json and exit")
    parser.add_argument("--skip-tests", action="store_true", help="skip step 1 (pytest -m gpu)")
    parser.add_argument("--skip-train", action="store_true", help="skip step 4 (training)")
    data = parser.add_argument_group("data")
    data.add_argument("--corpus", default=str(SHARED / "data/corpus/brown.txt"),
                      help="one sentence per line (default: ../shared/data/corpus/brown.txt)")
    data.add_argument("--data-dir", default=os.environ.get("SENTRAY_DATA_DIR",
                                                           str(SHARED / "data/senteval")),
                      help="SentEval folder, STS-B dev for training and the tests (default: "
                           "$SENTRAY_DATA_DIR, else ../shared/data/senteval)")
    embed = parser.add_argument_group("embed and memory (steps 2, 3)")
    embed.add_argument("--model", default="all-MiniLM-L6-v2", help="(default: %(default)s)")
    embed.add_argument("--head", default="0-8",
                       help="Ditto head L-H (default: %(default)s, all-MiniLM-L6-v2's on STS-B dev)")
    embed.add_argument("--sentences", type=int, help="GPU 20000, dry run 64")
    embed.add_argument("--batch-size", type=int, help="GPU 256, dry run 16")
    embed.add_argument("--precisions", help="comma-separated; GPU fp32,fp16,bf16, dry run fp32")
    embed.add_argument("--repeats", type=int, help="timed passes, best kept; GPU 3, dry run 1")
    embed.add_argument("--memory-batch", type=int, help="GPU 256, dry run 4")
    embed.add_argument("--memory-tokens", type=int, help="GPU 128, dry run 16")
    embed.add_argument("--peak-tflops", type=float, default=None,
                       help="the GPU's peak TFLOP/s for every precision (default: looked up by "
                            "device name for H100/H200/A100; unknown: no fraction)")
    train = parser.add_argument_group("training (step 4)")
    train.add_argument("--train-input", default=None,
                       help="jobs/augment.py output (default: out/brown-aug when it exists and "
                            "not --dry-run, else OUT/brown-aug-small made from --aug-lines lines)")
    train.add_argument("--aug-lines", type=int, help="GPU 5000, dry run 200")
    train.add_argument("--train-steps", type=int, help="steps per run; GPU 60, dry run 4")
    train.add_argument("--train-batch-sizes", help="GPU 64,512, dry run 8,16")
    train.add_argument("--train-precision", default="bf16",
                       help="AMP on GPU (default: %(default)s; the dry run trains fp32 on CPU)")
    train.add_argument("--keep-train-output", action="store_true",
                       help="keep each run's checkpoints and exports (default: summary only)")
    train.add_argument("--job-timeout", type=int, help="seconds per subprocess; GPU 300, dry 600")
    parser.add_argument("--serve-ray-cluster", nargs=2, type=int, metavar=("CPUS", "GPUS"),
                        help=argparse.SUPPRESS)  # internal: the helper holding step 4's cluster
    args = parser.parse_args(argv)
    for key, value in SIZES["dry" if args.dry_run else "gpu"].items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    for key in ("out", "corpus", "data_dir", "train_input", "markdown"):  # from the repo root
        if getattr(args, key):
            setattr(args, key, str((ROOT / getattr(args, key)).resolve()))
    args.precisions = [p.strip() for p in args.precisions.split(",") if p.strip()]
    args.train_batch_sizes = [int(b) for b in args.train_batch_sizes.split(",")]
    return args


# -- the report ---------------------------------------------------------------------------------


class StepFailed(RuntimeError):
    """A step that measured something and still failed: its figures go into the report."""

    def __init__(self, message: str, record: dict) -> None:
        super().__init__(message)
        self.record = record


class Report:
    """The JSON report, written after every step so that a crash keeps what was measured."""

    def __init__(self, out: Path, header: dict) -> None:
        self.out = out
        self.data = {**header, "steps": {}}

    def run_step(self, name: str, function: Callable[[], dict], skip: str | None = None) -> None:
        logger.info("== step %s", name)
        started = time.perf_counter()
        if skip:
            record = {"status": "skipped", "note": skip}
        else:
            try:
                record = {"status": "ok", **function()}
            except StepFailed as exc:  # figures measured before the failure are kept
                logger.error("step %s failed: %s", name, exc)
                record = {**exc.record, "status": "error", "error": str(exc)}
            except Exception as exc:  # recorded; the next step still runs
                logger.exception("step %s failed", name)
                record = {"status": "error", "error": f"{type(exc).__name__}: {exc}",
                          "traceback": traceback.format_exc(limit=8)[-3000:]}
        record["seconds"] = round(time.perf_counter() - started, 1)
        self.data["steps"][name] = record
        logger.info("step %s: %s in %.1f s", name, record["status"], record["seconds"])
        self.write()

    def failed(self) -> list[str]:
        return [name for name, r in self.data["steps"].items() if r["status"] == "error"]

    def write(self) -> None:
        self.data["failed_steps"] = self.failed()
        for name, text in (("gpu_check.json", json.dumps(self.data, indent=1)),
                           ("gpu_check.md", markdown(self.data))):
            partial = self.out / f".{name}.partial"
            partial.write_text(text + "\n", encoding="utf-8")
            partial.replace(self.out / name)


def environment() -> dict:
    import torch
    import transformers

    cuda = torch.cuda.is_available()
    env = {"python": platform.python_version(), "torch": torch.__version__,
           "transformers": transformers.__version__, "torch_cuda": torch.version.cuda,
           "cuda_available": cuda, "cpu_count": os.cpu_count(),
           "torch_threads": torch.get_num_threads(),
           "float32_matmul_precision": torch.get_float32_matmul_precision(),
           "device_name": torch.cuda.get_device_name() if cuda else None,
           "gpu_count": torch.cuda.device_count() if cuda else 0}
    with contextlib.suppress(ImportError):
        import ray
        env["ray"] = ray.__version__
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        env["git_commit"] = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, text=True,
                                           capture_output=True, check=True).stdout.strip()
        env["git_dirty"] = bool(subprocess.run(["git", "status", "--porcelain"], cwd=ROOT,
                                               text=True, capture_output=True).stdout.strip())
    return env


# -- step 1: the GPU-marked tests -----------------------------------------------------------------


def gpu_tests(args: argparse.Namespace, out: Path) -> dict:
    junit, log = out / "pytest-gpu.xml", out / "logs" / "pytest-gpu.log"
    command = [sys.executable, "-m", "pytest", "-q", "-m", "gpu", "-p", "no:cacheprovider",
               f"--junitxml={junit}"]
    junit.unlink(missing_ok=True)
    rc = run_logged(command, log, args.job_timeout, env={"SENTRAY_DATA_DIR": args.data_dir})
    if not junit.is_file():
        raise RuntimeError(f"pytest wrote no report (exit {rc}); see {log}:\n{tail(log)}")
    counts = dict.fromkeys(("tests", "failures", "errors", "skipped"), 0)
    root = ET.parse(junit).getroot()
    for suite in root.iter("testsuite"):
        for key in counts:
            counts[key] += int(suite.get(key, 0))
    failing = [f"{case.get('classname')}::{case.get('name')}" for case in root.iter("testcase")
               if case.find("failure") is not None or case.find("error") is not None]
    record = {"command": " ".join(command[1:]), "exit_code": rc, "collected": counts["tests"],
              "passed": counts["tests"] - counts["failures"] - counts["errors"]
              - counts["skipped"], "skipped": counts["skipped"], "failed": counts["failures"],
              "errors": counts["errors"], "failing_tests": failing, "log": str(log)}
    if counts["failures"] or counts["errors"] or rc not in (0, 5):  # 5: nothing collected
        raise StepFailed(f"{counts['failures']} failed, {counts['errors']} errors (exit {rc}); "
                         f"see {log}", record)
    if counts["skipped"] == counts["tests"]:
        import torch

        record["note"] = ("all skipped: torch sees no CUDA GPU" if not torch.cuda.is_available()
                          else "all skipped")
    return record


# -- steps 2 and 3: the encoder ------------------------------------------------------------------


def bench_module(name: str):
    """A module of bench/ (not a package) loaded from its file."""
    spec = importlib.util.spec_from_file_location(name, Path(__file__).with_name(f"{name}.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class Encoders:
    """One SentenceEncoder per (pooling, ditto_impl, precision), loaded once, shared by steps 2
    and 3."""

    def __init__(self, args: argparse.Namespace, device: str) -> None:
        self.args, self.device, self.cache = args, device, {}

    def get(self, pooling: str, ditto_impl: str, precision: str):
        from sentray.encoder import EncoderConfig, SentenceEncoder

        key = (pooling, ditto_impl, precision)
        if key not in self.cache:
            ditto = pooling == "ditto"
            self.cache[key] = SentenceEncoder(EncoderConfig(
                model=self.args.model, pooling=pooling, head=self.args.head if ditto else None,
                device=self.device, precision=precision, batch_size=self.args.batch_size,
                ditto_impl=ditto_impl))
        return self.cache[key]

    def clear(self) -> None:
        import torch

        self.cache.clear()
        if torch.cuda.is_available():
            torch.cuda.empty_cache()


POOLING_RUNS = (("mean", "auto"), ("ditto", "fast"), ("ditto", "eager"))


def pooling_name(pooling: str, ditto_impl: str) -> str:
    return pooling if pooling != "ditto" else f"ditto {ditto_impl}"


def peak_tflops(precision: str, override: float | None) -> tuple[float | None, str]:
    """The peak this precision's matmuls can reach on this GPU, and what that figure is."""
    import torch

    if override is not None:
        return override, "--peak-tflops"
    if not torch.cuda.is_available():
        return None, "CPU: no peak table"
    name = torch.cuda.get_device_name()
    for key, half, tf32, fp32 in PEAK_TFLOPS:
        if key in name:
            if precision in ("fp16", "bf16"):
                return half, f"{key} {precision} tensor cores, dense"
            if torch.get_float32_matmul_precision() != "highest":
                return tf32, f"{key} tf32 tensor cores, dense (fp32 matmuls run as tf32)"
            return fp32, (f"{key} fp32 without tensor cores (torch's default keeps tf32 off; "
                          f"tf32 peak would be {tf32:g})")
    return None, f"unknown GPU {name!r}: pass --peak-tflops"


def synchronize(device: str) -> None:
    import torch

    if device == "cuda":
        torch.cuda.synchronize()


def best_seconds(run: Callable[[], object], repeats: int, device: str) -> float:
    best = float("inf")
    for _ in range(repeats):
        synchronize(device)
        started = time.perf_counter()
        run()
        synchronize(device)
        best = min(best, time.perf_counter() - started)
    return best


def matmul_tflops(precision: str, device: str, seconds: float = 0.5) -> float:
    """TFLOP/s of a square matrix product in this precision on this device, measured now: the
    ceiling the model's FLOP/s is set against (as bench_pooling does with fp32 on CPU)."""
    import torch

    size = 8192 if device == "cuda" else 512
    dtype = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}[precision]
    a, b, c = (torch.randn(size, size, device=device, dtype=dtype) for _ in range(3))

    def products(count: int) -> None:
        for _ in range(count):
            torch.mm(a, b, out=c)

    one = best_seconds(lambda: products(1), 3, device)  # the first of these warms up
    runs = max(3, int(seconds / max(one, 1e-6)))
    return 2 * size ** 3 * runs / best_seconds(lambda: products(runs), 1, device) / 1e12


def embed_throughput(args: argparse.Namespace, encoders: Encoders, device: str) -> dict:
    import torch

    forward_flops = bench_module("bench_pooling").forward_flops
    texts = read_lines(Path(args.corpus), args.sentences)
    runs, failures = [], []
    for precision in args.precisions:
        matmul = None
        for pooling, ditto_impl in POOLING_RUNS:
            name = pooling_name(pooling, ditto_impl)
            logger.info("embed: %s %s, %d sentences, batch %d", name, precision, len(texts),
                        args.batch_size)
            run = {"pooling": name, "precision": precision, "batch_size": args.batch_size,
                   "sentences": len(texts)}
            try:
                encoder = encoders.get(pooling, ditto_impl, precision)
                batches = list(encoder.length_sorted_batches(encoder.tokenize(texts)))
                shapes = [tuple(b.input_ids.shape) for b in batches]  # (B, T) of each pass
                on_device = [(b.input_ids.to(encoder.device), b.attention_mask.to(encoder.device))
                             for b in batches]

                def forward(encoder=encoder, on_device=on_device):
                    with torch.inference_mode():
                        for input_ids, attention_mask in on_device:
                            encoder.embed_tokens(input_ids, attention_mask)  # (B, D), kept on GPU

                def encode(encoder=encoder):
                    encoder.encode(texts)

                forward()  # warm-up: kernels for every batch shape, allocator, autotuning
                forward_s = best_seconds(forward, args.repeats, device)
                # once: the same shapes as forward, plus tokenization, which dominates on a GPU
                encode_s = best_seconds(encode, 1, device)
                matmul = matmul or matmul_tflops(precision, device)
                real_tokens = int(sum(int(b.attention_mask.sum()) for b in batches))
                padded_tokens = sum(b * t for b, t in shapes)
                flops = forward_flops(encoder.model.config, shapes)
                peak, basis = peak_tflops(precision, args.peak_tflops)
                run.update({
                    "device": str(encoder.device), "fast_ditto": encoder.fast_ditto,
                    "forward_passes": len(shapes), "real_tokens": real_tokens,
                    "padded_tokens": padded_tokens,
                    "encode_seconds": round(encode_s, 4),
                    "encode_sentences_per_s": round(len(texts) / encode_s, 1),
                    "forward_seconds": round(forward_s, 4),
                    "forward_sentences_per_s": round(len(texts) / forward_s, 1),
                    "real_tokens_per_s": round(real_tokens / forward_s, 1),
                    "model_tflop": round(flops / 1e12, 4),
                    "model_tflops_per_s": round(flops / forward_s / 1e12, 4),
                    "peak_tflops": peak, "peak_basis": basis,
                    "fraction_of_peak": (round(flops / forward_s / 1e12 / peak, 4)
                                         if peak else None),
                    "matmul_tflops_per_s": round(matmul, 3),
                    "fraction_of_matmul": round(flops / forward_s / 1e12 / matmul, 4)})
            except Exception as exc:  # one failed precision does not hide the others
                logger.exception("embed %s %s failed", name, precision)
                run["error"] = f"{type(exc).__name__}: {exc}"
                failures.append(f"{name} {precision}")
            runs.append(run)
    record = {"model": args.model, "head": args.head, "corpus": args.corpus, "runs": runs,
              "note": "forward: pre-tokenized, length-sorted padded batches already on the "
                      "device, outputs left there, best of --repeats after a warm-up pass; "
                      "encode: SentenceEncoder.encode end to end (tokenize, pad, forward, copy "
                      "to host), once. FLOPs: bench_pooling.forward_flops over the padded "
                      "batches (linear layers and the two attention matmuls). Peak: NVIDIA's "
                      "data sheet; matmul: a square matrix product in the same precision "
                      "measured in this run (8192 on GPU, 512 on CPU)."}
    if failures:
        raise StepFailed(f"failed: {', '.join(failures)}", record)
    return record


def ditto_memory(args: argparse.Namespace, encoders: Encoders, device: str) -> dict:
    """Peak memory of one forward pass of a (batch, tokens) all-ones-mask synthetic batch."""
    import torch

    forward_flops = bench_module("bench_pooling").forward_flops
    batch, tokens = args.memory_batch, args.memory_tokens
    runs, failures = [], []
    for precision in args.precisions:
        for impl in ("fast", "eager"):
            run = {"ditto_impl": impl, "precision": precision, "batch": batch, "tokens": tokens}
            try:
                encoder = encoders.get("ditto", impl, precision)
                generator = torch.Generator().manual_seed(0)
                # (B, T) token ids above the special tokens; [CLS] first, as a tokenizer would
                input_ids = torch.randint(1000, encoder.tokenizer.vocab_size, (batch, tokens),
                                          generator=generator)
                input_ids[:, 0] = encoder.tokenizer.cls_token_id or 0
                input_ids = input_ids.to(encoder.device)
                attention_mask = torch.ones_like(input_ids)
                with torch.inference_mode():
                    encoder.embed_tokens(input_ids, attention_mask)  # warm-up
                    if device == "cuda":
                        torch.cuda.synchronize()
                        torch.cuda.empty_cache()
                        before = torch.cuda.memory_allocated()
                        torch.cuda.reset_peak_memory_stats()
                    started = time.perf_counter()
                    embeddings = encoder.embed_tokens(input_ids, attention_mask)  # (B, D)
                    synchronize(device)
                    seconds = time.perf_counter() - started
                    flops = forward_flops(encoder.model.config, [(batch, tokens)])
                    run["forward_seconds"] = round(seconds, 4)
                    run["model_tflops_per_s"] = round(flops / seconds / 1e12, 4)
                    run["embedding_shape"] = list(embeddings.shape)
                    del embeddings
                if device == "cuda":
                    peak = torch.cuda.max_memory_allocated()
                    run.update({"peak_allocated_mib": round(peak / MIB, 1),
                                "peak_over_resident_mib": round((peak - before) / MIB, 1),
                                "resident_before_mib": round(before / MIB, 1)})
                else:
                    run.update({"peak_allocated_mib": None, "peak_over_resident_mib": None})
            except Exception as exc:
                logger.exception("memory %s %s failed", impl, precision)
                run["error"] = f"{type(exc).__name__}: {exc}"
                failures.append(f"{impl} {precision}")
            runs.append(run)
    record = {"model": args.model, "head": args.head, "runs": runs}
    if device == "cuda":
        record["note"] = ("peak_over_resident: torch.cuda.max_memory_allocated during one "
                          "embed_tokens under inference_mode, minus what was allocated before "
                          "(weights of every loaded encoder, the input)")
    else:
        record["note"] = ("CPU: not measured (torch's CPU allocator keeps no peak counter and "
                          "tracemalloc does not see tensor memory); the forward pass ran")
    for precision in args.precisions:
        fast, eager = ({r["ditto_impl"]: r for r in runs if r["precision"] == precision}.get(i)
                       for i in ("fast", "eager"))
        if fast and eager and fast.get("peak_over_resident_mib") and eager.get(
                "peak_over_resident_mib"):
            record.setdefault("eager_over_fast", {})[precision] = round(
                eager["peak_over_resident_mib"] / fast["peak_over_resident_mib"], 2)
    if failures:
        raise StepFailed(f"failed: {', '.join(failures)}", record)
    return record


# -- step 4: training throughput -------------------------------------------------------------------


@contextlib.contextmanager
def private_ray_cluster(out: Path, cpus: int, gpus: int, timeout: int) -> Iterator[str]:
    """A loopback Ray cluster held by a helper process for the duration of the block; yields its
    address for the jobs' --address. One cluster for every job saves a cluster start per job;
    a helper process (rather than this one) makes a failed start retryable and the teardown
    exact: closing its stdin shuts down the cluster it started, and only that one."""
    log = out / "logs" / "ray-cluster.log"
    for attempt in (1, 2):  # a loaded 2-core machine can miss Ray's fixed 30 s start deadline
        with log.open("a") as stderr:
            helper = subprocess.Popen(
                [sys.executable, __file__, "--serve-ray-cluster", str(cpus), str(gpus)],
                cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr,
                text=True, env=job_env())
        ready, _, _ = select.select([helper.stdout], [], [], timeout)
        line = helper.stdout.readline().strip() if ready else ""  # the helper's only line
        if line.startswith("RAY_ADDRESS="):
            break
        stop_helper(helper)
        logger.warning("Ray cluster start failed (attempt %d); see %s", attempt, log)
    else:
        raise RuntimeError(f"could not start a local Ray cluster; see {log}:\n{tail(log)}")
    try:
        yield line.split("=", 1)[1]
    finally:
        stop_helper(helper)


def stop_helper(helper: subprocess.Popen) -> None:
    with contextlib.suppress(OSError):
        helper.stdin.close()
    try:
        helper.wait(timeout=60)
    except subprocess.TimeoutExpired:
        helper.terminate()
        helper.wait(timeout=30)


def serve_ray_cluster(cpus: int, gpus: int) -> None:
    """The helper: start the cluster, print its address, hold it until stdin closes."""
    protocol = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)  # anything else printed goes to the log, not to the address line's pipe
    import ray

    from sentray.runtime import init_ray

    started = init_ray(num_cpus=cpus, num_gpus=gpus)
    print(f"RAY_ADDRESS={ray.get_runtime_context().gcs_address}", file=protocol, flush=True)
    sys.stdin.read()
    if started:
        ray.shutdown()


def training_input(args: argparse.Namespace, out: Path, address: str) -> tuple[Path, dict]:
    """jobs/augment.py's output to train on: given, out/brown-aug (not in a dry run), or a
    small one made here from the corpus's first --aug-lines lines (kept for the next run)."""
    if args.train_input:
        return Path(args.train_input), {"source": "--train-input"}
    full = ROOT / "out" / "brown-aug"
    if not args.dry_run and (full / "_summary.json").is_file():
        return full, {"source": "out/brown-aug"}
    target = out / "brown-aug-small"
    info = {"source": f"first {args.aug_lines} corpus lines through jobs/augment.py"}
    head = out / "corpus-head.txt"
    lines = read_lines(Path(args.corpus), args.aug_lines)
    if (target / "_summary.json").is_file() and head.is_file() and (
            head.read_text(encoding="utf-8").splitlines() == lines):
        return target, {**info, "reused": True}
    shutil.rmtree(target, ignore_errors=True)
    shutil.rmtree(f"{target}-rejects", ignore_errors=True)
    head.write_text("\n".join(lines) + "\n", encoding="utf-8")
    actors = 2 if args.dry_run else max(2, min(8, (os.cpu_count() or 4) - 2))
    command = [sys.executable, "jobs/augment.py", "--input", str(head), "--output", str(target),
               "--actors", str(actors), "--address", address]
    started = time.perf_counter()
    rc = run_logged(command, out / "logs" / "augment.log", args.job_timeout)
    if rc != 0:
        raise RuntimeError(f"jobs/augment.py exited {rc}:\n{tail(out / 'logs' / 'augment.log')}")
    return target, {**info, "actors": actors, "seconds": round(time.perf_counter() - started, 1)}


def tiny_senteval(args: argparse.Namespace, out: Path, pairs: int = 64) -> Path:
    """A SentEval folder holding the first `pairs` STS-B dev pairs: the dry run's training
    scores dev at step 0 and at its end, and the whole file takes CPU minutes."""
    source = Path(args.data_dir) / "STS" / "STSBenchmark" / "sts-dev.csv"
    target = out / "senteval-tiny"
    (target / "STS" / "STSBenchmark").mkdir(parents=True, exist_ok=True)
    lines = source.read_text(encoding="utf-8").splitlines()[:pairs]
    (target / "STS" / "STSBenchmark" / "sts-dev.csv").write_text("\n".join(lines) + "\n",
                                                                 encoding="utf-8")
    return target


def train_throughput(args: argparse.Namespace, out: Path) -> dict:
    import torch

    on_gpu = not args.dry_run
    data_dir = Path(args.data_dir) if on_gpu else tiny_senteval(args, out)
    cpus = (os.cpu_count() or 4) if on_gpu else 4
    gpus = torch.cuda.device_count() if on_gpu else 0
    runs, failures = [], []
    with private_ray_cluster(out, cpus, gpus, timeout=180) as address:
        source, input_info = training_input(args, out, address)
        for objective in ("sifter", "simcse"):
            for batch in args.train_batch_sizes:
                run = train_run(args, out, address, source, data_dir, objective, batch)
                if "error" in run:
                    failures.append(f"{objective} batch {batch}")
                runs.append(run)
    record = {"input": str(source), **{f"input_{k}": v for k, v in input_info.items()},
              "stsb_dev": str(data_dir), "ray_cluster": {"cpus": cpus, "gpus": gpus},
              "runs": runs,
              "note": "steps/s = 1 / the job's seconds_per_step: mean wall time of steps 2..N "
                      "(batch fetch and tokenization included; step 1, the STS-B dev scoring "
                      "and checkpointing excluded)"}
    if failures:
        raise StepFailed(f"failed: {', '.join(failures)}", record)
    return record


def train_run(args: argparse.Namespace, out: Path, address: str, source: Path, data_dir: Path,
              objective: str, batch: int) -> dict:
    name = f"{objective}-b{batch}"
    folder = out / "train" / name
    shutil.rmtree(folder, ignore_errors=True)  # the same --output and --name would resume
    command = [sys.executable, "jobs/train.py", "--input", str(source), "--output", str(folder),
               "--data-dir", str(data_dir), "--objective", objective, "--batch-size", str(batch),
               "--max-steps", str(args.train_steps), "--eval-steps", str(args.train_steps),
               "--log-steps", "10", "--workers", "1", "--address", address]
    if not args.dry_run:
        command += ["--use-gpu", "--precision", args.train_precision]
    run = {"objective": objective, "batch_size": batch, "device": "cpu" if args.dry_run else
           "cuda", "precision": "fp32" if args.dry_run else args.train_precision,
           "command": " ".join(command[1:])}
    log = out / "logs" / f"train-{name}.log"
    logger.info("train: %s", run["command"])
    started = time.perf_counter()
    try:
        rc = run_logged(command, log, args.job_timeout)
        run["wall_seconds"] = round(time.perf_counter() - started, 1)
        if rc != 0:
            raise RuntimeError(f"jobs/train.py exited {rc}:\n{tail(log)}")
        summary = json.loads((folder / "summary.json").read_text())
        last = summary["history"][-1]
        seconds_per_step = last["seconds_per_step"]
        run.update({"rows": summary["rows"], "steps": summary["steps"],
                    "steps_per_epoch": summary["steps_per_epoch"],
                    "seconds_per_step": round(seconds_per_step, 4),
                    "steps_per_s": round(1 / seconds_per_step, 3),
                    "sentences_per_s": round(batch / seconds_per_step, 1),
                    "final_loss": last.get("loss"), "job_seconds": summary["seconds"]})
        (out / "train" / f"{name}-summary.json").write_text(json.dumps(summary, indent=1))
    except Exception as exc:
        logger.error("train %s failed: %s", name, exc)
        run["error"] = f"{type(exc).__name__}: {exc}"
    finally:
        if not args.keep_train_output:
            shutil.rmtree(folder, ignore_errors=True)  # checkpoints: hundreds of MB per run
    run["log"] = str(log)
    return run


# -- helpers -----------------------------------------------------------------------------------


def read_lines(path: Path, count: int) -> list[str]:
    if not path.is_file():
        raise FileNotFoundError(f"corpus {path} does not exist; pass --corpus FILE (one "
                                "sentence per line)")
    lines = []
    with path.open(encoding="utf-8") as f:
        for line in f:
            if line.strip():
                lines.append(line.rstrip("\n"))
                if len(lines) == count:
                    break
    return lines


def job_env(extra: dict | None = None) -> dict:
    return {**os.environ, "HF_HUB_OFFLINE": "1", **(extra or {})}


def run_logged(command: list[str], log: Path, timeout: int, env: dict | None = None) -> int:
    """Run from the repository root with output to `log`; the exit code (124 on timeout)."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("w") as f:
        try:
            return subprocess.run(command, cwd=ROOT, stdout=f, stderr=subprocess.STDOUT,
                                  env=job_env(env), timeout=timeout).returncode
        except subprocess.TimeoutExpired:
            f.write(f"\n[gpu_check] killed after {timeout} s\n")
            return 124


def tail(path: Path, lines: int = 15) -> str:
    with contextlib.suppress(OSError):
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    return ""


# -- markdown ----------------------------------------------------------------------------------


def _fmt(value, digits: int = 1) -> str:
    if value is None:
        return "—"
    if isinstance(value, float):
        return f"{value:,.{digits}f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def markdown(report: dict) -> str:
    """The report's tables, from its JSON alone (README tables are pasted from here)."""
    env, steps = report.get("environment", {}), report.get("steps", {})
    mode = "dry run (CPU, tiny sizes)" if report.get("dry_run") else "GPU"
    lines = [f"# gpu_check: {mode}", "",
             f"{env.get('device_name') or 'CPU'}, torch {env.get('torch')} (CUDA "
             f"{env.get('torch_cuda')}), transformers {env.get('transformers')}, ray "
             f"{env.get('ray')}, commit {str(env.get('git_commit'))[:10]}"
             f"{' (dirty)' if env.get('git_dirty') else ''}, {report.get('started')}", "",
             "| step | status | seconds | note |", "|---|---|---|---|"]
    for name in STEPS:
        step = steps.get(name)
        if step is None:
            lines.append(f"| {name} | not run | | |")
            continue
        note = step.get("error") or step.get("note") or ""
        lines.append(f"| {name} | {step['status']} | {_fmt(step.get('seconds'))} | "
                     f"{note.splitlines()[0][:160] if note else ''} |")
    tests = steps.get("gpu_tests", {})
    if "collected" in tests:
        lines += ["", "**GPU tests** (`pytest -m gpu`): "
                  f"{tests['passed']} passed, {tests['skipped']} skipped, {tests['failed']} "
                  f"failed, {tests['errors']} errors of {tests['collected']}"]
        lines += [f"- failing: `{name}`" for name in tests.get("failing_tests", [])]
    embed = steps.get("embed", {})
    if embed.get("runs"):
        first = embed["runs"][0]
        lines += ["", f"**Embedding** ({embed.get('model')}, Ditto head {embed.get('head')}, "
                  f"{_fmt(first.get('sentences'))} Brown sentences, batch "
                  f"{first.get('batch_size')}):", "",
                  "| pooling | precision | sentences/s (encode) | sentences/s (forward) | "
                  "real tokens/s (forward) | model TFLOP/s | fraction of peak | fraction of "
                  "matmul | peak basis |", "|---|---|---|---|---|---|---|---|---|"]
        for run in embed["runs"]:
            if "error" in run:
                lines.append(f"| {run['pooling']} | {run['precision']} | error: "
                             f"{run['error'][:80]} | | | | | | |")
                continue
            lines.append(f"| {run['pooling']} | {run['precision']} | "
                         f"{_fmt(run['encode_sentences_per_s'], 0)} | "
                         f"{_fmt(run['forward_sentences_per_s'], 0)} | "
                         f"{_fmt(run['real_tokens_per_s'], 0)} | "
                         f"{_fmt(run['model_tflops_per_s'], 3)} | "
                         f"{_fmt(run['fraction_of_peak'], 3)} | "
                         f"{_fmt(run['fraction_of_matmul'], 3)} | {run['peak_basis']} |")
    memory = steps.get("ditto_memory", {})
    if memory.get("runs"):
        first = memory["runs"][0]
        lines += ["", f"**Ditto peak memory**, one forward pass of {first['batch']} × "
                  f"{first['tokens']} tokens:", "",
                  "| Ditto | precision | peak MiB over resident | peak MiB allocated | "
                  "forward s | model TFLOP/s |", "|---|---|---|---|---|---|"]
        for run in memory["runs"]:
            if "error" in run:
                lines.append(f"| {run['ditto_impl']} | {run['precision']} | error: "
                             f"{run['error'][:80]} | | | |")
                continue
            lines.append(f"| {run['ditto_impl']} | {run['precision']} | "
                         f"{_fmt(run.get('peak_over_resident_mib'))} | "
                         f"{_fmt(run.get('peak_allocated_mib'))} | "
                         f"{_fmt(run.get('forward_seconds'), 4)} | "
                         f"{_fmt(run.get('model_tflops_per_s'), 3)} |")
        for precision, ratio in memory.get("eager_over_fast", {}).items():
            lines.append(f"\nEager / fast peak ({precision}): **{ratio:.2f}×**")
    train = steps.get("train", {})
    if train.get("runs"):
        lines += ["", f"**Training** (`jobs/train.py`, 1 worker, input {train.get('input')}):",
                  "", "| objective | batch | device | precision | steps | steps/s | "
                  "sentences/s | job wall s |", "|---|---|---|---|---|---|---|---|"]
        for run in train["runs"]:
            if "error" in run:
                lines.append(f"| {run['objective']} | {run['batch_size']} | {run['device']} | "
                             f"{run['precision']} | error: "
                             f"{run['error'].splitlines()[0][:80]} | | | |")
                continue
            lines.append(f"| {run['objective']} | {run['batch_size']} | {run['device']} | "
                         f"{run['precision']} | {run['steps']} | {_fmt(run['steps_per_s'], 3)} "
                         f"| {_fmt(run['sentences_per_s'], 0)} | {_fmt(run['wall_seconds'])} |")
    failed = report.get("failed_steps")
    lines += ["", f"Failed steps: {', '.join(failed)}" if failed else "All steps ran without "
              "error.", f"Total: {_fmt(report.get('seconds'))} s."]
    return "\n".join(lines)


# -- main --------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.serve_ray_cluster:
        serve_ray_cluster(*args.serve_ray_cluster)
        return 0
    if args.markdown:
        print(markdown(json.loads(Path(args.markdown).read_text())))
        return 0
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, force=True,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    os.environ["HF_HUB_OFFLINE"] = "1"
    import torch

    if not args.dry_run and not torch.cuda.is_available():
        print("error: torch sees no CUDA GPU; run with --dry-run to check the script on CPU",
              file=sys.stderr)
        return 2
    out = Path(args.out)
    (out / "logs").mkdir(parents=True, exist_ok=True)
    for stale in ("gpu_check.json", "gpu_check.md"):
        (out / stale).unlink(missing_ok=True)
    device = "cpu" if args.dry_run else "cuda"
    if args.dry_run:  # two spinning OpenMP threads crawl on a small shared machine; one does not
        torch.set_num_threads(1)
    started = time.perf_counter()
    config = {k: v for k, v in vars(args).items() if k not in ("markdown", "serve_ray_cluster")}
    report = Report(out, {"schema": 1, "dry_run": args.dry_run,
                          "started": dt.datetime.now().astimezone().isoformat(timespec="seconds"),
                          "argv": sys.argv[1:] if argv is None else argv, "config": config,
                          "environment": environment()})
    report.write()
    encoders = Encoders(args, device)
    report.run_step("gpu_tests", lambda: gpu_tests(args, out),
                    "--skip-tests" if args.skip_tests else None)
    report.run_step("embed", lambda: embed_throughput(args, encoders, device))
    report.run_step("ditto_memory", lambda: ditto_memory(args, encoders, device))
    encoders.clear()  # step 4's jobs get the GPU's memory
    report.run_step("train", lambda: train_throughput(args, out),
                    "--skip-train" if args.skip_train else None)
    report.data["seconds"] = round(time.perf_counter() - started, 1)
    report.write()
    failed = report.failed()
    logger.info("done in %.1f s; %s", report.data["seconds"],
                f"failed steps: {failed}" if failed else "every step ran")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
