"""The precision a search encodes its queries in (`--query-precision`): the rows' own plan,
exactly (`exact`), or the same model, read-out and runtime at bf16 (`bf16`), gated at start-up
against the rows' own vectors; `auto` takes bf16 where it is native on this CPU, passes its
gate and encoded the probe rows faster, else exact.

Why: a search service spends most of a query in its encoder (issue 67: 6-8 ms of a lone
query's 15-20 ms, on one thread of this project's AMD EPYC), and a query vector only has to
find the rows' neighbours, not be the rows' vector. On that CPU (AVX512-BF16, no AMX)
OpenVINO's bf16 encoded Brown queries at 1.5x fp32's rate in batches of 8 on one thread
(3.4 against 5.3 ms a query), lowest cosine to fp32 0.99995. The gate is the project's rule
for every bf16 path (`sentray.precision.probe.GATES`): each probe row's cosine to the rows'
own plan's vector >= 0.999; the search's recall against exact search with the rows' own
query vectors is measured by bench/bench_serve.py. Embedding APIs keep the exact encoder:
they answer the job's vectors."""

from __future__ import annotations

import logging
import time
from dataclasses import asdict, dataclass
from typing import Literal

from sentray.bulk_embedding.output import EmbeddingDescription
from sentray.bulk_embedding.query import QueryEncoder, bf16_runtime
from sentray.encode.runtimes import registry
from sentray.kit.cpu import BF16_CPU_FLAGS, cpu_bf16_native, cpu_info
from sentray.precision import probe

logger = logging.getLogger(__name__)

QueryPrecision = Literal["auto", "exact", "bf16"]
GATE_ROWS = 64  # probe sentences encoded at start-up by both encoders (~1 s here)


@dataclass(frozen=True)
class QueryPrecisionChoice:
    """What a search encodes its queries in, and why: `precision` exact or bf16; bf16's lowest
    probe-row cosine to the rows' own plan and its speed over it, where it was tried."""

    precision: Literal["exact", "bf16"]
    why: str
    cosine_min: float | None = None
    speedup: float | None = None

    def as_dict(self) -> dict:
        return {key: value for key, value in asdict(self).items() if value is not None}


def bf16_refusal(description: EmbeddingDescription, device: str,
                 flags: frozenset[str] | None = None) -> str | None:
    """Why bf16 queries are not tried for these rows on this machine (None: they are)."""
    if device != "cpu":
        return f"the queries run on {device}, not a CPU"
    if description.metric == "hamming":
        return "a packed-bit table's queries are bits: bf16 changes nothing there"
    if (description.settings.get("precision") or "fp32") not in ("fp32", "fp16"):
        return (f"its rows were encoded in {description.settings['precision']}, not fp32: "
                "their queries are encoded as they were")
    if not cpu_bf16_native(flags):
        return (f"{cpu_info()['name']} has neither {' nor '.join(BF16_CPU_FLAGS)}: bf16 is "
                "emulated there, slower than fp32")
    runtime = bf16_runtime(description)
    if not registry.runs_as_itself(runtime, "bf16"):
        return f"{runtime} runs bf16 as fp32 on this CPU"
    return None


def query_encoders(description: EmbeddingDescription, requested: QueryPrecision, *,
                   device: str, s3_endpoint: str | None = None, float_output: bool = False,
                   ) -> tuple[QueryEncoder, QueryEncoder, QueryPrecisionChoice]:
    """(the search's query encoder, the rows' own (exact) one, the choice): both the same
    encoder unless bf16 was taken. `bf16` asked for and refused or failing its gate: a
    ValueError saying why."""
    if requested not in ("auto", "exact", "bf16"):
        raise ValueError(f"query precision must be auto, exact or bf16, got {requested!r}")
    exact = QueryEncoder(description, device=device, s3_endpoint=s3_endpoint,
                         float_output=float_output)
    if requested == "exact":
        return exact, exact, QueryPrecisionChoice("exact", "asked for")
    refused = bf16_refusal(description, exact.plan.device)
    if refused is not None:
        return exact, exact, _exact_instead(requested, refused)
    fast = QueryEncoder(description, device=device, s3_endpoint=s3_endpoint,
                        float_output=float_output, precision="bf16")
    cosine, speedup = gate(fast, exact, probe.probe_texts()[:GATE_ROWS])
    if cosine < probe.GATES["bf16"]:
        return exact, exact, _exact_instead(
            requested, f"bf16's lowest probe-row cosine to the rows' plan is {cosine:.5f}, "
                       f"under the gate {probe.GATES['bf16']}", cosine, speedup)
    if requested == "auto" and speedup < probe.MARGIN:
        return exact, exact, QueryPrecisionChoice(
            "exact", f"auto: bf16 passed its gate but ran at {speedup:.2f}x the rows' plan "
                     f"(under {probe.MARGIN}x)", cosine, speedup)
    choice = QueryPrecisionChoice("bf16", f"{'auto: ' if requested == 'auto' else ''}passed "
                                  f"its gate ({cosine:.5f} >= {probe.GATES['bf16']}), "
                                  f"{speedup:.2f}x the rows' plan", cosine, speedup)
    logger.info("queries encoded in bf16 on %s: %s", fast.plan.runtime, choice.why)
    return fast, exact, choice


def _exact_instead(requested: str, reason: str, cosine: float | None = None,
                   speedup: float | None = None) -> QueryPrecisionChoice:
    if requested == "bf16":
        raise ValueError(f"--query-precision bf16 cannot be used here: {reason}; use "
                         "--query-precision exact (or auto, which falls back to it)")
    logger.info("queries encoded as the rows were (exact): %s", reason)
    return QueryPrecisionChoice("exact", f"auto: {reason}", cosine, speedup)


def gate(fast: QueryEncoder, exact: QueryEncoder, texts: list[str]) -> tuple[float, float]:
    """(the lowest per-row cosine of `fast`'s vectors of `texts` to `exact`'s, `fast`'s speed
    over `exact`'s): each encodes them once untimed (its shapes' first calls), then timed."""
    reference, exact_s = _timed(exact, texts)
    vectors, fast_s = _timed(fast, texts)
    cosine = float(probe.cosines(vectors.astype("float32"),
                                 reference.astype("float32")).min())
    return cosine, exact_s / max(fast_s, 1e-9)


def _timed(encoder: QueryEncoder, texts: list[str]):
    encoder.encode(texts)
    started = time.perf_counter()
    vectors = encoder.encode(texts)
    return vectors, time.perf_counter() - started
