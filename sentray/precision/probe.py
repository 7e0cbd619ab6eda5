"""A plan's runtime and precision measured on the CPU that runs the encoders, never assumed from
its flags (on an Intel Xeon with AVX512-BF16 and no AMX, torch bf16 ran at 0.65x fp32; on an AMD
EPYC with the same flag, 2.88x).

The candidates are runtime x precision, each registered runtime at the precisions it declares
probed (`sentray.encode.runtimes.registry.candidates`: torch fp32 and bf16; ONNX Runtime fp32
and int8; OpenVINO fp32 (at an explicit f32 hint), bf16 and int8). `--precision fp32` weighs the
exact ones (their vectors within `EXACT_TOLERANCE` of torch's); `auto` all of them.

How it decides:

1. Each candidate encodes the corpus's rows, in runs spread over it (`probe_sentences`; the
   job reads them with `sentray.corpus.reading.spread_texts`: rows like the job's;
   the bundled sample's rows 300-555 for a corpus too small) at the job's steady state:
   length-sorted batches of the job's own batch size, timed in `spread` order (every prefix a
   mix of the lengths), on the threads the job's encoders will have, each batch run once
   untimed (its shape's first call, its kernels) and then timed, its rate counted at the job's
   padding: torch fp32, the reference, for `PROBE_SECONDS` of timed calls, every other
   candidate on the very batches it timed (the same sentences); a candidate under half torch
   fp32's rate after two timed batches is stopped. A candidate its runtime says it would not
   run as asked is not timed (`runs_as_itself`: OpenVINO's bf16 hint where its plugin runs
   f32, torch bf16 where its oneDNN has no bf16). Building a candidate's encoder and its
   shapes' first calls are its one-time cost (`compile_seconds`), never folded into its rate.
2. A candidate passes its gate against torch fp32's vectors: an exact one by the largest
   difference of a component (<= 1e-5, the tolerance the tests hold fp32 to); bf16 by the
   lowest per-row cosine (>= 0.999); int8 likewise (>= 0.97: it refuses a broken model, not a
   noisy row).
3. Of the passing candidates, the one that finishes the job's rows first, its one-time cost
   counted, is chosen if it takes <= 1/`MARGIN` of torch fp32's time; otherwise torch fp32,
   which is the reference. Its vectors of the corpus rows it encoded ride on the plan
   (`EncoderPlan.probed`): the job's encoders take them, not encode them again. The log says
   what the probe cost against what its choice saves the job.
4. Conversions cost once and are cached: the ONNX graph the ONNX Runtime and OpenVINO
   candidates run (`EXPORT_FACTOR` x the probe's fp32 time, ~1.3 s for all-MiniLM-L6-v2 here)
   and the int8 model both int8 candidates run (`PREPARE_FACTOR` x its calibration rows' fp32
   time, ~13 s here). A conversion not in the cache is made for a job that pays it back: the
   job's rows at the best rate measured so far take >= `PAYBACK` x its estimated cost
   (otherwise the log says what it would take; a job of unknown size converts nothing), and,
   for the int8 model, where its largest matrix product timed in int8 and fp32 says it can beat
   that rate at all (`int8_products`: a CPU whose int8 products are no faster makes none).

The decision (rates, differences, cosines, choice) is cached per CPU model, thread count, model
files, pooling, head, max length, batching, candidates and the conversions at hand, in
$SENTRAY_CACHE_DIR/precision/<key>/: the probe runs once per kind of machine, not per job.
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
from typing import Protocol

import numpy as np

from sentray.encode.plan import EncoderPlan, ProbedRows
from sentray.encode.runtimes import registry
from sentray.kit.cpu import cpu_info
from sentray.precision import artefacts, int8_products

logger = logging.getLogger(__name__)

EXACT_TOLERANCE = 1e-5  # largest difference of a component from torch fp32's
GATES = {"bf16": 0.999, "int8": 0.97}  # lowest per-row cosine to torch fp32
MARGIN = 1.05  # a candidate other than torch fp32 must beat it by this much (timing noise)
PROBE_SECONDS = 0.4  # timed, at most, per candidate (after its untimed pass)
SCOUT_ROWS = 4  # sentences a candidate is first timed on, to drop one far under the floor
PROBE_ROWS = (300, 556)  # rows of the bundled sample the probe encodes (a corpus too small)
PROBE_SAMPLE_ROWS = 256  # the corpus's rows the probe encodes (spread over it: `spread_texts`)
MIN_CORPUS_ROWS = 64  # a corpus of fewer rows is probed on the bundled sample
PAYBACK = 4.0  # a conversion for a job of >= PAYBACK x its estimated cost
EXPORT_FACTOR = 2.0  # the ONNX export ~ 2 x the probe sentences' fp32 time
PREPARE_FACTOR = 12.0  # the int8 model ~ 12 x its calibration rows' fp32 time


class ProbeWatcher(Protocol):
    """What a job that runs its encoders in the probe's process may do beside the probe (the
    embedding job: its first rows, `sentray.bulk_embedding.early_rows`)."""

    def reference(self, encoder) -> None:
        """torch fp32's encoder (`SentenceEncoder`), built, before the probe times anything."""

    def decided(self, plan: EncoderPlan) -> None:
        """The plan the probe decided (`plan_encoder` tells it, in this process)."""


@dataclass
class Measured:
    """One candidate on the probe sample."""

    runtime: str
    precision: str
    rate: float  # sentences/s
    rows: int  # probe sentences it encoded
    max_difference: float  # of a component, from torch fp32's
    cosine_min: float
    passed: bool
    compile_seconds: float = 0.0  # once: building its encoder, its shapes' first calls


@dataclass
class Decision:
    """What the probe chose on this CPU, with what it measured."""

    runtime: str
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


@dataclass
class Timed:
    """One candidate's timing on the probe batches."""

    rate: float  # sentences/s at steady state, at the job's padding (`time_batches`)
    vectors: np.ndarray  # (rows, D) of the rows encoded, in batch order
    positions: np.ndarray  # (rows,) each vector's index in the probe's sentences
    warm_seconds: float  # the first calls of the shapes beyond their timed second calls


def spread(batches: list) -> list:
    """Length-sorted `batches` in an order whose every prefix mixes the lengths as the whole
    does (the middle batch, then the quarters, the eighths ...): a candidate timed on the
    first few meets the corpus's mix of lengths, not its longest rows only."""
    order, seen, parts = [], set(), 1
    while len(order) < len(batches):
        for j in range(parts):
            i = int((2 * j + 1) * len(batches) / (2 * parts))
            if i not in seen:
                seen.add(i)
                order.append(i)
        parts *= 2
    return [batches[i] for i in order]


def time_batches(forward: Callable, batches: list, dimension: int, floor: float | None = None,
                 *, seconds: float | None = PROBE_SECONDS, scout: float | None = None,
                 warm_every_shape: bool = True,
                 clock: Callable[[], float] = time.perf_counter) -> Timed:
    """`forward` at steady state on `batches` (their `spread` order): each batch called once
    untimed (its shape's first call: kernels made, graphs compiled) and then timed, until
    `seconds` of timed calls have passed (None: every batch given), or after two batches when
    the rate so far is under `floor`; only the batches timed are warmed. What a first call
    took beyond its timed twin is the candidate's one-time cost (`warm_seconds`), weighed as
    such, never folded into its rate. With a `floor`, the first `SCOUT_ROWS` sentences of the
    first batch are timed on their second call before anything else: a candidate far under the
    floor (under half of `scout`, default `floor`: torch bf16 emulated on a CPU without bf16
    instructions ran at 1/15 of fp32 on an AVX2 EPYC, 8 s a batch of 32) costs two small calls,
    not a batch. The floor and the rate are at the job's padding. `warm_every_shape` False (a
    runtime whose kernels are not built per input shape, `Runtime.shapes_compile`): only the
    first batch is called untimed first (its one-time costs), the others once, timed."""
    scout = scout or floor
    if floor and batches:
        ids, mask = batches[0].input_ids[:SCOUT_ROWS], batches[0].attention_mask[:SCOUT_ROWS]
        started = clock()
        forward(ids, mask)
        first = clock() - started
        started = clock()
        out = np.asarray(forward(ids, mask).float())
        took = max(clock() - started, 1e-9)
        rate = len(out) / took
        if rate < scout / 2:  # a quarter of torch fp32 even at a small batch's efficiency
            return Timed(rate, out.reshape(-1, dimension),
                         np.asarray(batches[0].positions[:SCOUT_ROWS]), max(first - took, 0.0))
    parts, positions, done, timed, warm, padded, real = [], [], 0, 0.0, 0.0, 0, 0
    for batch in batches:
        first = None
        if warm_every_shape or not parts:
            started = clock()
            forward(batch.input_ids, batch.attention_mask)  # its shape's first call, untimed
            first = clock() - started
        started = clock()
        parts.append(np.asarray(forward(batch.input_ids, batch.attention_mask).float()))
        took = max(clock() - started, 1e-9)
        timed += took
        if first is not None:
            warm += max(first - took, 0.0)
        positions.append(np.asarray(batch.positions))
        done += len(parts[-1])
        padded += int(batch.attention_mask.numel())
        real += int(batch.attention_mask.sum())
        # at the job's padding: it sorts blocks of thousands of rows by length (~1% padding),
        # where a few hundred rows sorted pad more; its rows cost what their real tokens do here
        rate = done / timed * padded / max(real, 1)
        if (seconds is not None and timed >= seconds) or (floor and len(parts) >= 2
                                                           and rate < floor):
            break
    return Timed(rate, np.concatenate(parts).reshape(-1, dimension), np.concatenate(positions),
                 warm)


def gate(precision: str, vectors: np.ndarray, reference: np.ndarray) -> tuple[float, float, bool]:
    """(largest difference of a component, lowest cosine, passed) against torch fp32."""
    common = min(len(vectors), len(reference))  # the first rows, in the same batch order
    difference = float(np.abs(vectors[:common] - reference[:common]).max())
    cosine = float(cosines(vectors[:common], reference[:common]).min())
    passed = difference <= EXACT_TOLERANCE if precision == "fp32" else cosine >= GATES[precision]
    return difference, cosine, passed


def job_seconds(candidate: Measured, rows: int | None) -> float:
    """A job of `rows` rows on `candidate`: its one-time cost, then its rows at its rate (rows
    unknown: one second of steady work, by which the rates alone decide)."""
    if rows is None:
        return 1.0 / max(candidate.rate, 1e-9)
    return candidate.compile_seconds + rows / max(candidate.rate, 1e-9)


def choose(measured: list[Measured], rows: int | None = None) -> tuple[tuple[str, str], str]:
    """The rule: of the candidates that pass their gate, the one whose one-time cost and rate
    finish a job of `rows` rows first, if it does so in <= 1/MARGIN of torch fp32's time; else
    torch fp32."""
    reference = next(m for m in measured if (m.runtime, m.precision) == ("torch", "fp32"))
    best = min((m for m in measured if m.passed), key=lambda m: job_seconds(m, rows))
    if best is not reference and (job_seconds(reference, rows)
                                  >= MARGIN * job_seconds(best, rows)):
        compiled = (f", {best.compile_seconds:.1f} s once to build and compile"
                    if best.compile_seconds >= 0.05 else "")
        return (best.runtime, best.precision), (
            f"{best.runtime} {best.precision} measured {best.rate / reference.rate:.2f}x torch "
            f"fp32 on this CPU{compiled}, " + (f"vectors within {best.max_difference:.1e}"
                                     if best.precision == "fp32"
                                     else f"cosine to fp32 >= {best.cosine_min:.4f}"))
    return ("torch", "fp32"), (f"no candidate measured at least {MARGIN:.2f}x torch fp32 with "
                               "its gate passed" + ("" if rows is None else
                                                    f" for {rows} rows, its one-time cost "
                                                    "counted"))


def worth_converting(kind: str, rows: int | None, rate: float, reference_rate: float,
                     calibration_rows: int, probe_rows: int) -> tuple[bool, str]:
    """Whether a job of `rows` rows (None: unknown, no) pays for converting to `kind`: its rows
    at `rate` (the best measured so far) take >= PAYBACK x the conversion's estimated cost."""
    cost = (EXPORT_FACTOR * probe_rows if kind == "onnx"
            else PREPARE_FACTOR * calibration_rows) / max(reference_rate, 1e-9)
    if rows is None:
        return False, (f"{kind} not tried: not in the cache (about {cost:.0f} s to make, "
                       "estimated) and the job's size is unknown")
    job = rows / max(rate, 1e-9)
    if job >= PAYBACK * cost:
        return True, (f"{kind} made: {rows} rows take about {job:.0f} s at the best rate "
                      f"measured, >= {PAYBACK:g} x the ~{cost:.0f} s estimated to make it")
    return False, (f"{kind} not tried: {rows} rows take about {job:.0f} s at the best rate "
                   f"measured, under {PAYBACK:g} x the ~{cost:.0f} s estimated to make it")


def decision_key(plan: EncoderPlan, threads: int, grid: tuple, ready: dict) -> str:
    made_of = {"cpu": cpu_info()["name"], "threads": threads,
               "model": plan.model.fingerprint, "pooling": plan.pooling, "head": plan.head,
               "max_length": plan.max_length, "batch": plan.batch_size,
               "tokens": plan.max_tokens_per_batch, "grid": grid,
               "ready": {kind: a.digest if a else None for kind, a in sorted(ready.items())}}
    return hashlib.sha256(json.dumps(made_of, sort_keys=True).encode()).hexdigest()[:24]


def read_decision(key: str) -> Decision | None:
    found = artefacts.read_files("precision", key, "decision.json")
    try:
        return None if found is None else Decision(**{**json.loads(found[0]), "cached": True})
    except (ValueError, TypeError):
        return None


def write_decision(key: str, decision: Decision) -> None:
    artefacts.write_files("precision", key, {
        "decision.json": json.dumps(dataclasses.asdict(decision), indent=1).encode()})


def log_decision(decision: Decision) -> None:
    told = ", ".join(f"{m['runtime']} {m['precision']} {m['rate']:.0f}/s"
                     + ("" if m["passed"] else " (failed its gate)") for m in decision.measured)
    logger.info("%s %s on %s, %d threads: %s; measured%s: %s", decision.runtime,
                decision.precision, decision.cpu, decision.threads, decision.why,
                " (a decision cached for this CPU, model and batching)" if decision.cached
                else "", told)


def decide(plan: EncoderPlan, calibration: artefacts.Calibration, *, rows: int | None,
           threads: int | None = None, exact: bool = False, module=None,
           tokenizer=None, measure: bool = True, corpus: Sequence[str] | None = None,
           watcher: ProbeWatcher | None = None) -> EncoderPlan:
    """`plan` (torch fp32, on a CPU) on the runtime and precision measured fastest for a job of
    `rows` rows (None: unknown) on `threads` torch threads (default: this process's), with
    the artefact it runs; `exact`: the fp32 candidates only. The decision is cached per kind of
    machine. `module`/`tokenizer`: a model handed in (tests), probed as it is. `measure=False`
    (a job too small to pay for measuring): a decision cached on this kind of machine, else
    torch fp32. `corpus`: the job's rows, which the probe encodes (`probe_sentences`);
    the chosen candidate's vectors of them ride on the plan (`probed`). `watcher`: told of
    torch fp32's encoder once it is built, before anything is timed, when the probe measures
    (`ProbeWatcher`)."""
    threads = threads or default_threads()
    # what could run here, known without importing a runtime: the key; whether each runs as
    # itself (which imports it: OpenVINO's capabilities) only asked when measuring, so that a
    # process with a cached decision imports the runtime it runs and no other
    grid = tuple(c for c in registry.candidates()
                 if registry.available(c[0]) and (not exact or c[1] == "fp32")
                 and registry.computes(c[0], plan.pooling))
    kinds = sorted({registry.artefact_kind(*c) for c in grid} - {None})
    ready = {kind: artefacts.cached(kind, plan, calibration, module) for kind in kinds}
    key = decision_key(plan, threads, grid, ready)
    decision = read_decision(key)
    if decision is not None and reconsider(decision, rows, calibration):
        decision = None  # decided for a smaller job: this one may pay for a conversion
    if decision is not None:
        decision = for_this_run(decision, rows, calibration)
    if decision is None and exact and rows is None:
        return plan.running("fp32", why="fp32 on torch: a job of unknown size, and no runtime "
                            "measured faster on this kind of machine yet")
    if decision is None and not measure:
        return plan.running("fp32", why=f"{'fp32' if exact else 'auto'}: a job of {rows} rows "
                            "costs less than measuring, and nothing was measured on this kind "
                            "of machine yet: torch fp32")
    probed = None
    if decision is None:
        import torch

        previous = torch.get_num_threads()
        torch.set_num_threads(threads)
        started = time.perf_counter()
        try:
            decision, probed = measure_grid(
                plan, calibration, rows, threads,
                tuple(c for c in grid if registry.runs_as_itself(*c)), ready, module,
                tokenizer, corpus, watcher)
        finally:
            torch.set_num_threads(previous)
        log_payback(decision, rows, time.perf_counter() - started)
        ready = {kind: artefacts.cached(kind, plan, calibration, module) for kind in kinds}
        write_decision(decision_key(plan, threads, grid, ready), decision)
    log_decision(decision)
    kind = registry.artefact_kind(decision.runtime, decision.precision)
    artefact = None if kind is None else artefacts.prepare(kind, plan, calibration,
                                                           module=module, tokenizer=tokenizer)
    when = " (decided earlier on this kind of machine)" if decision.cached else ""
    return plan.running(decision.precision, runtime=decision.runtime, artefact=artefact,
                        why=f"{'fp32' if exact else 'auto'}{when}: {decision.why}",
                        measured=tuple(decision.measured), probed=probed)


def log_payback(decision: Decision, rows: int | None, seconds: float) -> None:
    """What the probe cost (`seconds`) against what its choice saves this job's `rows` over
    torch fp32, the job's one-time costs counted."""
    by = {(m["runtime"], m["precision"]): m for m in decision.measured}
    reference, chosen = by[("torch", "fp32")], by[(decision.runtime, decision.precision)]
    if rows is None:
        logger.info("the probe took %.1f s; the job's size is unknown, so its payback is too",
                    seconds)
        return

    def job(m: dict) -> float:
        return m.get("compile_seconds", 0.0) + rows / max(m["rate"], 1e-9)

    saved = job(reference) - job(chosen)
    logger.info("the probe took %.1f s; on %s %s this job's %d rows take about %.0f s, against "
                "%.0f s on torch fp32: %s", seconds, decision.runtime, decision.precision, rows,
                job(chosen), job(reference),
                f"it pays for itself {saved / seconds:.1f}x" if saved >= seconds else
                f"it saves {max(saved, 0.0):.1f} s, under its cost")


def reconsider(decision: Decision, rows: int | None,
               calibration: artefacts.Calibration) -> bool:
    """Whether a cached decision that left a conversion out should be made again for `rows`."""
    rates = {(m["runtime"], m["precision"]): m["rate"] for m in decision.measured}
    reference = rates.get(("torch", "fp32"))
    if not reference or "not tried" not in decision.why:
        return False
    best = max(rates.values())
    return any(worth_converting(kind, rows, best, reference, calibration.rows,
                                len(probe_texts()))[0]
               for kind in ("onnx", "onnx-int8") if f"{kind} not tried" in decision.why)


def for_this_run(decision: Decision, rows: int | None,
                 calibration: artefacts.Calibration) -> Decision:
    """A cached decision as this run tells it: its notes on conversions weighed for the job
    that made it ("N rows take about T s ...") said again of this job's `rows`."""
    rates = {(m["runtime"], m["precision"]): m["rate"] for m in decision.measured}
    reference = rates.get(("torch", "fp32"))
    if not reference:
        return decision
    notes = []
    for note in decision.why.split("; "):
        kind = next((k for k in ("onnx-int8", "onnx")
                     if note.startswith((f"{k} not tried", f"{k} made:"))), None)
        if kind is None:
            notes.append(note)
        elif note.startswith(f"{kind} made:"):
            notes.append(f"{kind} made by an earlier run (in this machine's cache)")
        else:
            notes.append(worth_converting(kind, rows, max(rates.values()), reference,
                                          calibration.rows, len(probe_texts()))[1])
    return dataclasses.replace(decision, why="; ".join(notes))


def default_threads() -> int:
    """torch's default thread count (the physical cores it sees), without importing torch
    when it is not loaded yet."""
    import os
    import sys

    if "torch" in sys.modules:
        return sys.modules["torch"].get_num_threads()
    return max(1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity")
               else os.cpu_count() or 1)


def probe_sentences(corpus: Sequence[str] | None) -> tuple[list[str], bool]:
    """The sentences the probe encodes, and whether they are the corpus's: its first
    `PROBE_SAMPLE_ROWS` non-blank rows (rows like the ones the job will encode), else, for a
    corpus of fewer than `MIN_CORPUS_ROWS` (or none given), the bundled sample's."""
    rows = [t for t in (corpus or ()) if isinstance(t, str) and t.strip()][:PROBE_SAMPLE_ROWS]
    if len(rows) >= MIN_CORPUS_ROWS:
        return rows, True
    return probe_texts(), False


def measure_grid(plan: EncoderPlan, calibration: artefacts.Calibration, rows: int | None,
                 threads: int, grid: tuple, ready: dict, module, tokenizer,
                 corpus: Sequence[str] | None = None, watcher: ProbeWatcher | None = None
                 ) -> tuple[Decision, ProbedRows | None]:
    """Every candidate of `grid` timed at steady state on the probe sentences (`corpus`'s
    rows, else the bundled sample's), the conversions each needs made where the job pays
    them back; the decision by `choose`, and the winner's vectors of the corpus rows it encoded
    (kept by the job's encoders, not encoded again). `watcher`: `decide`'s."""
    import torch

    from sentray.encode.encoder import SentenceEncoder

    encoders = {}

    def build(runtime: str, precision: str, artefact=None) -> tuple[SentenceEncoder, float]:
        own = copy.deepcopy(module) if module is not None and precision == "bf16" else module
        started = time.perf_counter()
        encoder = SentenceEncoder(plan.running(precision, runtime=runtime, why="probed",
                                               artefact=artefact), model=own, tokenizer=tokenizer)
        encoders[(runtime, precision)] = encoder
        return encoder, time.perf_counter() - started

    texts, from_corpus = probe_sentences(corpus)
    reference_encoder = SentenceEncoder(plan, model=module, tokenizer=tokenizer)
    tokenizer = reference_encoder.tokenizer  # every candidate's: loaded once (~0.1 s each)
    if watcher is not None:  # before any timing: its work is not the candidates'
        watcher.reference(reference_encoder)
    token_ids = reference_encoder.tokenize(texts)
    batches = spread(list(reference_encoder.length_sorted_batches(token_ids)))
    with torch.inference_mode():
        # torch fp32's build is the job's baseline (the model loaded), not a cost of its own
        timed = time_batches(reference_encoder.embed_tokens, batches, plan.dimension,
                             warm_every_shape=registry.get(plan.runtime).shapes_compile)
        reference, runs = timed.vectors, {("torch", "fp32"): timed}
        # the others time the very batches torch fp32 timed: the same sentences
        batches = batches[:int(np.searchsorted(np.cumsum([len(b.input_ids) for b in batches]),
                                               len(reference)) + 1)]
        measured = [Measured("torch", "fp32", timed.rate, len(reference), 0.0, 1.0, True,
                             round(timed.warm_seconds, 3))]
        notes, artefact_of = [], dict(ready)
        for runtime, precision in probe_order(grid[1:]):
            kind = registry.artefact_kind(runtime, precision)
            if kind is not None and kind not in artefact_of:
                continue  # its conversion was weighed, and not made
            if kind is not None and artefact_of[kind] is None:
                worth, note = conversion_pays(kind, plan, rows, measured, artefact_of, grid,
                                              calibration.rows, len(texts), threads)
                notes.append(note)
                if not worth:
                    del artefact_of[kind]
                    continue
                artefact_of[kind] = artefacts.prepare(kind, plan, calibration, module=module,
                                                      tokenizer=tokenizer,
                                                      encoder=reference_encoder)
            encoder, built = build(runtime, precision, artefact_of.get(kind))
            runs[(runtime, precision)] = time_candidate(encoder, built, batches, reference,
                                                        measured, rows)
    chosen, why = choose(measured, rows)
    kept = kept_rows(runs[chosen], texts, token_ids, plan.max_length) if from_corpus else None
    if chosen in encoders and module is None:  # built, compiled and warmed: the job's to take
        registry.keep_forward(encoders[chosen].plan, encoders[chosen].forward, threads)
    return Decision(*chosen, "; ".join([why, *notes]),
                    [{k: round(v, 8) if isinstance(v, float) else v
                      for k, v in dataclasses.asdict(m).items()} for m in measured],
                    cpu_info()["name"], threads), kept


def time_candidate(encoder, built: float, batches: list, reference: np.ndarray,
                   measured: list[Measured], rows: int | None) -> Timed:
    """`encoder`'s candidate (built in `built` s) timed on the batches torch fp32 timed
    (`reference`: its vectors), its `Measured` appended to `measured`. Stopped after two
    batches when more than the timing margin under the rate that finishes the job first
    (`finishing_rate`; a near tie is timed on every batch: OpenVINO fp32 at 584/s on two, under
    ONNX Runtime's 590/s, then ran at 636/s against its 539/s in the job), and logged."""
    plan, reference_rate = encoder.plan, measured[0].rate  # torch fp32's
    floor = finishing_rate(measured, rows, built) / MARGIN
    run = time_batches(encoder.embed_tokens, batches, plan.dimension,
                       floor=max(reference_rate / 2, floor), scout=reference_rate / 2,
                       seconds=None, warm_every_shape=registry.get(plan.runtime).shapes_compile)
    measured.append(Measured(plan.runtime, plan.precision, run.rate, len(run.vectors),
                             *gate(plan.precision, run.vectors, reference),
                             round(built + run.warm_seconds, 3)))
    if len(run.vectors) < len(reference) and run.rate < floor:
        logger.info("%s %s stopped after %d of the probe's %d rows: %.0f/s, more than the "
                    "timing margin under the %.0f/s it needs to finish %s first", plan.runtime,
                    plan.precision, len(run.vectors), len(reference), run.rate, floor * MARGIN,
                    f"this job's {rows} rows" if rows is not None else "a job")
    return run


# The precisions in the order they are timed after torch fp32 (the registry's order of runtimes
# within each): bf16 before fp32, int8 last. The early ones set the bar the later ones are
# stopped under (`finishing_rate`), and a conversion is weighed at the best rate measured before
# it: the int8 model, the costliest conversion, last, against every other rate.
TIMED_AFTER_REFERENCE = ("bf16", "fp32", "int8")


def probe_order(candidates: Sequence[tuple[str, str]]) -> list[tuple[str, str]]:
    """`candidates` (runtime, precision) in the order the probe times them after torch fp32
    (`TIMED_AFTER_REFERENCE`)."""
    order = {precision: i for i, precision in enumerate(TIMED_AFTER_REFERENCE)}
    return sorted(candidates, key=lambda c: order.get(c[1], len(order)))


def finishing_rate(measured: list[Measured], rows: int | None, built: float) -> float:
    """The rate a candidate that took `built` seconds to build must reach to finish a job of
    `rows` rows before the best candidate measured so far (`job_seconds`, its own one-time cost
    counted; rows unknown: that candidate's rate). Timing one that is under it after two
    batches would cost probe time it can never pay back: `time_batches` stops it there."""
    best = min((m for m in measured if m.passed), key=lambda m: job_seconds(m, rows))
    if rows is None:
        return best.rate
    return rows / max(job_seconds(best, rows) - built, 1e-9)


def conversion_pays(kind: str, plan: EncoderPlan, rows: int | None, measured: list[Measured],
                    artefact_of: dict, grid: tuple, calibration_rows: int, probe_rows: int,
                    threads: int) -> tuple[bool, str]:
    """Whether to make the artefact `kind` (not in the cache) for this job, and the note that
    says why: its rows must pay back its estimated cost at the best rate measured so far and,
    for the int8 model, its largest matrix product timed in int8 must say it can beat that."""
    best = max(m.rate for m in measured if m.passed)
    reference = measured[0].rate  # torch fp32's
    worth, note = worth_converting(kind, rows, best, reference, calibration_rows, probe_rows)
    if worth and kind == "onnx-int8" and artefact_of.get("onnx") is not None:
        worth, note = int8_products.int8_can_pay(
            note, artefact_of["onnx"].data, {
                m.runtime: m.rate for m in measured if m.precision == "fp32"
                and m.passed and (m.runtime, "int8") in grid},
            best, MARGIN, plan.max_tokens_per_batch or 32 * plan.batch_size, threads)
    return worth, note


def kept_rows(run: Timed, texts: list[str], token_ids: list[list[int]],
              max_length: int) -> ProbedRows | None:
    """The chosen candidate's vectors of the corpus rows it encoded, with their texts: only rows
    under `max_length` tokens (one window, as the job encodes them whether it truncates or
    chunks)."""
    whole = [i for i, p in enumerate(run.positions) if len(token_ids[p]) < max_length]
    if not whole:
        return None
    return ProbedRows(tuple(texts[run.positions[i]] for i in whole),
                      np.ascontiguousarray(run.vectors[whole], dtype=np.float32))
