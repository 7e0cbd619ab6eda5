"""The markdown report: gpu_check's tables, built from the JSON report alone.

The README's tables are pasted from here, and `python -m bench.gpu_check --markdown JSON`
rebuilds them from any saved gpu_check.json, so nothing in them may come from anywhere else.
One function per section; a section whose step did not run (or measured nothing) is left out,
and a run that failed shows its error in place of its figures."""

from __future__ import annotations


def markdown(report: dict, step_names: tuple[str, ...]) -> str:
    """The whole report: header, one status row per step in `step_names`, each step's table."""
    steps = report.get("steps", {})
    lines = header(report) + status_table(steps, step_names)
    lines += gpu_tests_section(steps.get("gpu_tests", {}))
    lines += embed_section(steps.get("embed", {}))
    lines += memory_section(steps.get("ditto_memory", {}))
    lines += train_section(steps.get("train", {}))
    lines += feed_section(steps.get("feed", {}))
    failed = report.get("failed_steps")
    lines += ["", f"Failed steps: {', '.join(failed)}" if failed else "All steps ran without "
              "error.", f"Total: {_fmt(report.get('seconds'))} s."]
    return "\n".join(lines)


def _fmt(value, digits: int = 1) -> str:
    """A figure for a table cell: thousands separated, floats to `digits`, None as a dash."""
    if value is None:
        return "—"
    if isinstance(value, float):
        return f"{value:,.{digits}f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def header(report: dict) -> list[str]:
    env = report.get("environment", {})
    mode = "dry run (CPU, tiny sizes)" if report.get("dry_run") else "GPU"
    return [f"# gpu_check: {mode}", "",
            f"{env.get('device_name') or 'CPU'}, torch {env.get('torch')} (CUDA "
            f"{env.get('torch_cuda')}), transformers {env.get('transformers')}, ray "
            f"{env.get('ray')}, commit {str(env.get('git_commit'))[:10]}"
            f"{' (dirty)' if env.get('git_dirty') else ''}, {report.get('started')}", ""]


def status_table(steps: dict, step_names: tuple[str, ...]) -> list[str]:
    """One row per step: its status, seconds and the first line of its error or note."""
    lines = ["| step | status | seconds | note |", "|---|---|---|---|"]
    for name in step_names:
        step = steps.get(name)
        if step is None:
            lines.append(f"| {name} | not run | | |")
            continue
        note = step.get("error") or step.get("note") or ""
        lines.append(f"| {name} | {step['status']} | {_fmt(step.get('seconds'))} | "
                     f"{note.splitlines()[0][:160] if note else ''} |")
    return lines


def gpu_tests_section(tests: dict) -> list[str]:
    if "collected" not in tests:
        return []
    lines = ["", "**GPU tests** (`pytest -m gpu`): "
             f"{tests['passed']} passed, {tests['skipped']} skipped, {tests['failed']} "
             f"failed, {tests['errors']} errors of {tests['collected']}"]
    return lines + [f"- failing: `{name}`" for name in tests.get("failing_tests", [])]


def embed_section(embed: dict) -> list[str]:
    if not embed.get("runs"):
        return []
    first = embed["runs"][0]
    lines = ["", f"**Embedding** ({embed.get('model')}, Ditto head {embed.get('head')}, "
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
    return lines


def memory_section(memory: dict) -> list[str]:
    if not memory.get("runs"):
        return []
    first = memory["runs"][0]
    lines = ["", f"**Ditto peak memory**, one forward pass of {first['batch']} × "
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
    return lines


def train_section(train: dict) -> list[str]:
    if not train.get("runs"):
        return []
    lines = ["", f"**Training** (`jobs/train.py`, 1 worker, input {train.get('input')}):",
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
    return lines


def feed_section(feed: dict) -> list[str]:
    if not feed.get("forward_rows_per_s"):
        return []
    return ["", f"**Feeding the GPU** (`jobs/embed.py` on its Ray path, {_fmt(feed['rows'])} "
            f"rows, {feed['precision']}, batch {feed['batch_size']}):", "",
            "| forward only rows/s | job rows/s (steady) | job rows/s (whole pipeline) | busy |",
            "|---|---|---|---|",
            f"| {_fmt(feed['forward_rows_per_s'], 0)} | {_fmt(feed.get('job_steady_rows_per_s'), 0)}"
            f" | {_fmt(feed.get('job_rows_per_s'), 0)} | {_fmt(feed.get('busy_fraction'), 3)} |"]
