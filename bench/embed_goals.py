"""The verdicts of bench/bench_embed.py: issue 66's goals judged from one size's runs (each
with the sizes it is judged at), and every candidate's steady rate against what each job chose
and what its probe logged."""

from __future__ import annotations


def goal(text: str, value: float, least: float, sizes: tuple[int, ...], size: int) -> str:
    """One goal's line: the ratio, the goal, and whether this run met it (at the goal's sizes)."""
    where = f" at {' and '.join(f'{s:,}' for s in sizes)} rows" if sizes else ""
    verdict = ("met" if value >= least else "NOT met") if not sizes or size in sizes else \
        f"not judged at {size:,}"
    return f"goal: {text}: {value:.2f}x (goal >= {least}{where}): {verdict}"


def at_most(text: str, value: float, most: float, unit: str, sizes: tuple[int, ...],
            size: int) -> str:
    """One goal's line for a figure that must stay under a bound."""
    where = f" at {' and '.join(f'{s:,}' for s in sizes)} rows" if sizes else ""
    verdict = ("met" if value <= most else "NOT met") if not sizes or size in sizes else \
        f"not judged at {size:,}"
    return f"goal: {text}: {value:.2f}{unit} (goal <= {most:g}{unit}{where}): {verdict}"


def goal_lines(size: int, runs: list[dict]) -> list[str]:
    """Issue 66's goals this run can judge (a goal whose runs were left out is not printed)."""
    by = {r.get("job") or r.get("alone") and f"alone-{r['alone']}": r for r in runs}
    peers = [r for r in runs if r["peer"]]
    best = max(peers, key=lambda r: r["rate"]) if peers else None
    torch32 = next((r for r in peers if r["kind"] == "torch"), None)
    auto, default, ray = by.get("auto"), by.get("default"), by.get("auto-ray")
    lines = []
    if auto and best:
        lines += [goal("jobs/embed.py --precision auto (first run) / fastest peer",
                       auto["rate"] / best["rate"], 1.25, (50_000,), size),
                  goal("jobs/embed.py --precision auto (first run) / fastest peer",
                       auto["rate"] / best["rate"], 1.0, (10_000,), size)]
    if ray and best:
        lines.append(goal("jobs/embed.py --precision auto on its Ray path (first run) / fastest "
                          "peer", ray["rate"] / best["rate"], 1.3,
                          (size,) if size >= 100_000 else (100_000,), size))
    if default and torch32:
        lines.append(goal("jobs/embed.py at its default fp32 / sentence-transformers torch fp32",
                          default["rate"] / torch32["rate"], 1.5, (50_000,), size))
    for run in (default, auto, ray):  # the Ray path's too: its early rows (a private cluster)
        if run and run.get("timings", {}).get("fixed") is not None:
            lines.append(at_most(f"{run['run']}: its first part file on disk after launch",
                                 run["timings"]["fixed"], 5.0, " s", (10_000,), size))
    if auto and "alone-auto" in by:
        lines.append(goal("jobs/embed.py auto / its own encoder in process",
                          auto["rate"] / by["alone-auto"]["rate"], 0.9, (50_000,), size))
    lines.append(goal("best FLOP ratio of sentray's runs",
                      max(r["flop_ratio"] for r in runs if not r["peer"]), 0.5, (), size))
    if default and auto and default.get("stsb") is not None and auto.get("stsb") is not None:
        lines.append(f"goal: auto's STS-B within 0.3 of fp32's ({auto['stsb']:.2f} vs "
                     f"{default['stsb']:.2f}): "
                     f"{'met' if abs(auto['stsb'] - default['stsb']) <= 0.3 else 'NOT met'}")
    return lines


def candidates_table(rows: list[dict], chosen: list[dict]) -> str:
    """The candidates' steady rates in this process, and auto's choices against the fastest
    that passes its gate."""
    from sentray.precision.probe import EXACT_TOLERANCE, GATES

    def passed(row):  # a row the runtime does not run as asked is no candidate (the probe's)
        return row.get("runs_as_asked", True) and (
            row["max_difference"] <= EXACT_TOLERANCE if row["precision"] == "fp32"
            else row["cosine_min"] >= GATES[row["precision"]])

    def verdict(row):
        if not row.get("runs_as_asked", True):
            return "not a candidate: the runtime does not run it as asked on this CPU"
        return "passed" if passed(row) else "failed"

    lines = ["| runtime | precision | sentences/s | max difference | min cosine | gate |",
             "|---|---|---|---|---|---|"]
    lines += [f"| {r['runtime']} | {r['precision']} | {r['rate']:.0f} | "
              f"{r['max_difference']:.1e} | {r['cosine_min']:.5f} | {verdict(r)} |"
              for r in rows]
    rate = {(r["runtime"], r["precision"]): r["rate"] for r in rows}
    for run in chosen:  # fp32 (the default) chooses among the exact candidates only
        fastest = max((r for r in rows if passed(r) and (run["job"] != "default"
                                                         or r["precision"] == "fp32")),
                      key=lambda r: r["rate"])
        ratio = rate.get((run["runtime"], run["precision"]), 0) / fastest["rate"]
        lines.append(goal(f"{run['run']}: its choice's steady rate / the fastest passing "
                          f"candidate's ({fastest['runtime']} {fastest['precision']})",
                          ratio, 0.95, (), 0))
        logged = next((m["rate"] for m in run.get("measured") or ()
                       if (m["runtime"], m["precision"]) == (run["runtime"], run["precision"])),
                      None)
        steady = rate.get((run["runtime"], run["precision"]))
        if logged and steady:  # what the probe said of its choice, against what it then does
            lines.append(f"goal: {run['run']}: the probe's logged rate of its choice "
                         f"({logged:.0f}/s) / that candidate's steady rate here ({steady:.0f}/s):"
                         f" {logged / steady:.2f} (goal within 15%): "
                         f"{'met' if abs(logged / steady - 1) <= 0.15 else 'NOT met'}")
    return "\n".join(lines)
