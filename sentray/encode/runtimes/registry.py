"""The registry of runtimes: every caller (the config, the plan, the probe, the query encoder, the
output's settings) asks it, and none names a runtime. `RUNTIMES` is in the order a precision's
default runtime is taken: the first that runs it (fp32, bf16, fp16: torch; int8: ONNX Runtime,
as before runtimes were chosen, so an output made then, which records none, names it).

Importing it imports no runtime's package: each is imported by the process that builds its
forward, or asks whether it runs a precision as itself."""

from __future__ import annotations

from sentray.encode.runtimes import onnxruntime_runtime, openvino_runtime, torch_runtime
from sentray.encode.runtimes.runtime import Runtime

RUNTIMES: dict[str, Runtime] = {r.name: r for r in (
    torch_runtime.RUNTIME,
    onnxruntime_runtime.RUNTIME,
    openvino_runtime.RUNTIME,
)}
# the precisions the probe times, in the order it times them (then each runtime's, in order)
PROBE_ORDER = ("fp32", "bf16", "int8")


def register(runtime: Runtime) -> None:
    """Add `runtime` (a plug-in, or a test's stand-in), or replace the one of its name."""
    RUNTIMES[runtime.name] = runtime


def unregister(name: str) -> None:
    RUNTIMES.pop(name, None)


def names() -> tuple[str, ...]:
    return tuple(RUNTIMES)


def get(name: str) -> Runtime:
    """The runtime `name` (ValueError naming the registered ones)."""
    try:
        return RUNTIMES[name]
    except KeyError:
        raise ValueError(f"no runtime {name!r}; the runtimes are {', '.join(RUNTIMES)}") from None


def runs(name: str, precision: str) -> bool:
    return name in RUNTIMES and precision in RUNTIMES[name].precisions


def check_runs(name: str, precision: str) -> None:
    """ValueError when runtime `name` does not run `precision`, naming the ones it does."""
    if not runs(name, precision):
        raise ValueError(f"--runtime {name} does not run --precision {precision}; it runs "
                         + ", ".join(get(name).precisions))


def artefact_kind(name: str, precision: str) -> str | None:
    """The kind of artefact runtime `name` runs `precision` from (None: the torch model)."""
    check_runs(name, precision)
    return RUNTIMES[name].precisions[precision]


def default_runtime(precision: str) -> str:
    """The runtime `precision` runs on when none is chosen (nor recorded)."""
    return next(r.name for r in RUNTIMES.values() if precision in r.precisions)


def recorded_before() -> dict[str, str]:
    """precision -> the runtime it ran on before outputs recorded one (an output made then
    records none): each precision's default, as it was then and still is. Should a default
    change, this table keeps the old one."""
    return {precision: default_runtime(precision) for precision in ("fp32", "bf16", "fp16",
                                                                    "int8")}


def available(name: str) -> bool:
    """Whether runtime `name` is registered and its package is here (not imported)."""
    return name in RUNTIMES and RUNTIMES[name].available()


def computes(name: str, pooling: str) -> bool:
    return get(name).computes(pooling)


def check_computes(name: str, pooling: str) -> None:
    runtime = get(name)
    if not runtime.computes(pooling):
        raise ValueError(f"--runtime {name} does not compute the {pooling} pooling right "
                         f"({runtime.wrong_poolings}); use --runtime "
                         + " or ".join(r.name for r in RUNTIMES.values() if r.computes(pooling))
                         + ", or --runtime auto")


def candidates() -> tuple[tuple[str, str], ...]:
    """Every (runtime, precision) the probe may time, torch fp32 (the reference) first."""
    return tuple((r.name, precision) for precision in PROBE_ORDER for r in RUNTIMES.values()
                 if precision in r.probed)


def runs_as_itself(name: str, precision: str) -> bool:
    return get(name).runs_as_itself(precision)


def build_forward(plan, model=None, threads: int | None = None):
    """The forward pass of `plan` on its runtime (`model`: a torch module handed in): the one
    kept for it in this process (`keep_forward`), taken once, else built."""
    if model is None:
        kept = _KEPT.pop(_forward_key(plan, threads), None)
        if kept is not None:
            return kept
    return get(plan.runtime).build_forward(plan, model, threads)


# The forward the probe built for the candidate it chose (its model loaded or its graph compiled,
# its shapes warmed), kept for the job's encoder in the same process: ~0.4 s of OpenVINO's compile
# and first calls at the start of a job. One at most; `drop_kept` where the encoders run elsewhere.
_KEPT: dict[tuple, object] = {}


def _forward_key(plan, threads: int | None) -> tuple:
    from sentray.encode.runtimes.graph_forward import default_threads

    return (plan.model.fingerprint, plan.pooling, plan.head, plan.max_length, plan.device,
            plan.ditto_impl, plan.precision, plan.runtime,
            plan.artefact.digest if plan.artefact else None, default_threads(threads))


def keep_forward(plan, forward, threads: int | None = None) -> None:
    """Keep `forward` (built from `plan`, on `threads`) for the next `build_forward` of the same
    plan in this process, in place of any kept before."""
    _KEPT.clear()
    _KEPT[_forward_key(plan, threads)] = forward


def drop_kept() -> None:
    """Let go of a kept forward (its encoders are built in other processes)."""
    _KEPT.clear()


def graph_runner(name: str, graph: bytes, precision: str, threads: int | None = None):
    """A call of an ONNX `graph` on runtime `name` (from named inputs to its first output)."""
    runner = get(name).graph_runner
    if runner is None:
        raise ValueError(f"runtime {name} runs no ONNX graph")
    return runner(graph, precision, threads)


def silence_side_effects() -> None:
    """Each runtime's silencing of what its package does on import (OpenVINO's telemetry, which
    NNCF sends through too): before a tool that may import one (NNCF) is imported."""
    for runtime in RUNTIMES.values():
        runtime.silence()
