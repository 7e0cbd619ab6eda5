"""`--precision auto` on a CPU: measured on the CPU that runs the encoder, never assumed from
its flags (on an Intel Xeon with AVX512-BF16 and no AMX, bf16 ran at 0.65x fp32; on an AMD EPYC
with the same flag, 2.88x).

How it decides:

1. fp32, bf16 and int8 each encode the same probe sentences (rows 300-555 of the bundled Brown
   sample: not the int8 calibration rows), after a warm-up batch, on the threads the job's
   encoders will have; each is timed until `PROBE_SECONDS` have passed or the sample is done
   (a candidate under half fp32's speed after its first batches is stopped there).
2. A candidate passes when the lowest per-row cosine of its vectors to fp32's reaches its gate:
   bf16 >= 0.999 (bf16 measured min 0.99986 over 10,000 Brown rows, mean and Ditto) and int8
   >= 0.97 (NNCF int8 measured min 0.986 over 2,000 rows on AVX2, 0.987 on an AVX512-VNNI
   Xeon; a rare row lower is expected: the gate refuses a broken model, not a noisy row).
3. The fastest passing candidate is chosen if it is at least `MARGIN` x fp32's measured rate;
   otherwise fp32, which is exact. So auto is never slower than fp32 as measured there.
4. int8 has a one-time cost: its model is exported and calibrated once (about 25 s for
   all-MiniLM-L6-v2 on 2 cores), then cached. It is a candidate when its model is already
   cached, or when the job's rows at fp32's measured rate would take at least `PAYBACK` x the
   estimated cost of preparing it (`PREPARE_FACTOR` x the calibration rows' fp32 time: 25 s
   against 2.2 s of encoding, measured here). Otherwise the log says what it would take.

The decision (speeds, cosines, choice) is cached per CPU model, thread count, model files,
pooling, head, max length and int8 model in $SENTRAY_CACHE_DIR/precision/<key>/: the probe
runs once per kind of machine, not per job.
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import json
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from importlib import resources

import numpy as np

from sentray.encode.plan import Artefact, EncoderPlan
from sentray.kit.cpu import cpu_info
from sentray.precision import artefacts, cache

logger = logging.getLogger(__name__)

CANDIDATES = ("fp32", "bf16", "int8")
GATES = {"fp32": 1.0, "bf16": 0.999, "int8": 0.97}  # lowest per-row cosine to fp32
MARGIN = 1.05  # a candidate other than fp32 must beat fp32 by this much (timing noise)
PROBE_SECONDS = 2.0  # at most this long per candidate, after its warm-up batch
PROBE_ROWS = (300, 556)  # rows of the bundled sample the probe encodes
PAYBACK = 4.0  # prepare int8 only for a job of >= PAYBACK x its estimated preparation time
PREPARE_FACTOR = 12.0  # preparing int8 ~ 12 x encoding its calibration rows in fp32


@dataclass
class Measured:
    """One candidate on the probe sample."""

    precision: str
    rate: float  # sentences/s
    rows: int  # probe sentences it encoded
    cosine_min: float
    cosine_mean: float
    passed: bool


@dataclass
class Decision:
    """What `--precision auto` chose on this CPU, with what it measured."""

    precision: str
    why: str
    measured: list[dict]
    cpu: str
    threads: int
    cached: bool = False


def probe_texts() -> list[str]:
    lines = (resources.files("sentray") / "data" / "sample.txt").read_text(
        encoding="utf-8").splitlines()
    return [line for line in lines[PROBE_ROWS[0]:PROBE_ROWS[1]] if line.strip()]


def cosines(vectors: np.ndarray, reference: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(vectors, axis=1) * np.linalg.norm(reference, axis=1)
    return (vectors * reference).sum(1) / np.maximum(norms, 1e-12)


def time_encode(encode: Callable[[list[str]], np.ndarray], texts: Sequence[str],
                batch_size: int, floor: float | None = None, *,
                clock: Callable[[], float] = time.perf_counter) -> tuple[float, np.ndarray]:
    """(sentences/s, vectors of the rows encoded) of `encode` over `texts` in batches, after
    one warm-up batch (not timed); stops after PROBE_SECONDS, or after two batches when the
    rate so far is under `floor`."""
    encode(list(texts[:batch_size]))  # warm-up: first-call allocations, kernel selection
    parts, done, started = [], 0, clock()
    for start in range(0, len(texts), batch_size):
        parts.append(encode(list(texts[start:start + batch_size])))
        done += len(parts[-1])
        elapsed = max(clock() - started, 1e-9)
        if elapsed >= PROBE_SECONDS or (floor and len(parts) >= 2 and done / elapsed < floor):
            break
    return done / max(clock() - started, 1e-9), np.concatenate(parts)


def choose(measured: list[Measured]) -> tuple[str, str]:
    """The rule: the fastest passing candidate at >= MARGIN x fp32's rate, else fp32."""
    fp32 = next(m for m in measured if m.precision == "fp32")
    best = max((m for m in measured if m.passed), key=lambda m: m.rate)
    if best.precision != "fp32" and best.rate >= MARGIN * fp32.rate:
        return best.precision, (f"{best.precision} measured {best.rate / fp32.rate:.2f}x "
                                f"fp32 on this CPU, cosine to fp32 >= {best.cosine_min:.4f}")
    return "fp32", ("no candidate measured at least "
                    f"{MARGIN:.2f}x fp32 with its quality gate passed")


def int8_worth_preparing(rows: int | None, fp32_rate: float,
                         calibration_rows: int) -> tuple[bool, str]:
    """Whether a job of `rows` rows pays for preparing the int8 model (None: unknown, no)."""
    estimate = PREPARE_FACTOR * calibration_rows / max(fp32_rate, 1e-9)
    if rows is None:
        return False, (f"int8 not tried: its model is not prepared (about {estimate:.0f} s, "
                       "estimated); run once with --precision int8 to prepare and cache it")
    job = rows / max(fp32_rate, 1e-9)
    if job >= PAYBACK * estimate:
        return True, (f"int8 tried: {rows} rows take about {job:.0f} s in fp32 at its measured "
                      f"rate, >= {PAYBACK:g} x the ~{estimate:.0f} s estimated to prepare it")
    return False, (f"int8 not tried: {rows} rows take about {job:.0f} s in fp32 at its measured "
                   f"rate, under {PAYBACK:g} x the ~{estimate:.0f} s estimated to prepare it; "
                   "run once with --precision int8 to prepare and cache it")


def decision_key(plan: EncoderPlan, threads: int, int8_digest: str | None) -> str:
    made_of = {"cpu": cpu_info()["name"], "threads": threads,
               "model": plan.model.fingerprint, "pooling": plan.pooling, "head": plan.head,
               "max_length": plan.max_length, "batch": plan.batch_size, "int8": int8_digest}
    return hashlib.sha256(json.dumps(made_of, sort_keys=True).encode()).hexdigest()[:24]


def read_decision(key: str) -> Decision | None:
    found = cache.read_files("precision", key, "decision.json")
    try:
        return None if found is None else Decision(**{**json.loads(found[0]), "cached": True})
    except (ValueError, TypeError):
        return None


def write_decision(key: str, decision: Decision) -> None:
    cache.write_files("precision", key, {
        "decision.json": json.dumps(dataclasses.asdict(decision), indent=1).encode()})


def log_decision(decision: Decision) -> None:
    told = ", ".join(f"{m['precision']} {m['rate']:.0f}/s"
                     + ("" if m["precision"] == "fp32" else
                        f" (cosine min {m['cosine_min']:.4f}{'' if m['passed'] else ', failed'})")
                     for m in decision.measured)
    logger.info("precision auto: %s on %s, %d threads: %s; measured%s: %s", decision.precision,
                decision.cpu, decision.threads, decision.why,
                " (a decision cached for this CPU, model and pooling)" if decision.cached else "",
                told)


def decide(plan: EncoderPlan, calibration: artefacts.Calibration, *, rows: int | None,
           threads: int | None = None, module=None, tokenizer=None) -> EncoderPlan:
    """`plan` (fp32, on a CPU) in the precision `auto` chooses for a job of `rows` rows (None:
    unknown) on `threads` torch threads (default: this process's), its int8 artefact with it
    when int8 is chosen. The decision is cached per kind of machine (a cached decision imports
    no torch). `module`/`tokenizer`: a model handed in (tests), probed as it is."""
    threads = threads or default_threads()
    int8_key = artefacts.artefact_key(plan, calibration,
                                      artefacts.model_identity(plan, module))
    ready = artefacts.read_cached(int8_key)
    key = decision_key(plan, threads, ready.digest if ready else None)
    decision = read_decision(key)
    if decision is not None and ready is None and reconsider_int8(decision, rows, calibration):
        decision = None  # decided for a smaller job, without int8: this one may pay for it
    if decision is None:
        import torch

        previous = torch.get_num_threads()
        torch.set_num_threads(threads)
        try:
            decision = measure_candidates(plan, calibration, rows, threads, ready, module,
                                          tokenizer)
        finally:
            torch.set_num_threads(previous)
        if ready is None and (ready := artefacts.read_cached(int8_key)) is not None:
            key = decision_key(plan, threads, ready.digest)  # prepared while measuring
        write_decision(key, decision)
    log_decision(decision)
    artefact = None
    if decision.precision == "int8":
        artefact = ready or artefacts.read_cached(int8_key)
        if artefact is None:  # chosen after preparing it: in the cache now
            raise RuntimeError(f"int8 was chosen but its model {int8_key} is not in the cache")
    when = " (decided earlier on this kind of machine)" if decision.cached else ""
    return plan.running(decision.precision, why=f"auto{when}: {decision.why}",
                        artefact=artefact, measured=tuple(decision.measured))


def reconsider_int8(decision: Decision, rows: int | None,
                    calibration: artefacts.Calibration) -> bool:
    """Whether a cached decision that left int8 out should be made again for `rows`."""
    rates = {m["precision"]: m["rate"] for m in decision.measured}
    return ("int8" not in rates and "fp32" in rates
            and int8_worth_preparing(rows, rates["fp32"], calibration.rows)[0])


def default_threads() -> int:
    """torch's default thread count (the physical cores it sees), without importing torch
    when it is not loaded yet."""
    import os
    import sys

    if "torch" in sys.modules:
        return sys.modules["torch"].get_num_threads()
    return max(1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity")
               else os.cpu_count() or 1)


def measure_candidates(plan: EncoderPlan, calibration: artefacts.Calibration, rows: int | None,
                       threads: int, ready: Artefact | None, module, tokenizer) -> Decision:
    """Every candidate timed on the probe sentences; the decision by `choose`."""
    from sentray.encode.encoder import SentenceEncoder

    def encoder(precision: str, artefact: Artefact | None = None) -> SentenceEncoder:
        own = copy.deepcopy(module) if module is not None and precision == "bf16" else module
        return SentenceEncoder(plan.running(precision, why="probed", artefact=artefact),
                               model=own, tokenizer=tokenizer)

    texts, batch = probe_texts(), plan.batch_size
    rate, reference = time_encode(encoder("fp32").encode, texts, batch)
    measured = [Measured("fp32", rate, len(reference), 1.0, 1.0, True)]
    notes = []
    for precision in CANDIDATES[1:]:
        artefact = None
        if precision == "int8":
            if ready is None:
                worth, note = int8_worth_preparing(rows, rate, calibration.rows)
                notes.append(note)
                if not worth:
                    continue
            artefact = ready or artefacts.prepare_int8(plan, calibration, module=module,
                                                       tokenizer=tokenizer)
        speed, vectors = time_encode(encoder(precision, artefact).encode, texts, batch,
                                     floor=rate / 2)
        common = min(len(vectors), len(reference))  # the first rows of the same sentences
        similar = cosines(vectors[:common], reference[:common])
        measured.append(Measured(precision, speed, common, float(similar.min()),
                                 float(similar.mean()),
                                 bool(similar.min() >= GATES[precision])))
    chosen, why = choose(measured)
    return Decision(chosen, "; ".join([why, *notes]),
                    [{k: round(v, 6) if isinstance(v, float) else v
                      for k, v in dataclasses.asdict(m).items()} for m in measured],
                    cpu_info()["name"], threads)
