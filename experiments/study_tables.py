"""The Markdown tables of docs/results.md made from the study's run records (sifter_study.py
--table): one row per run group (mean ± std over its seeds), SIFTER − SimCSE paired by seed at
the lrs chosen on STS-B dev and at equal lrs, each SIFTER variant against its plain run, the
papers' figures and the dev curves. sifter_study.py writes them into the document."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))  # experiments/ is no package
from study_runs import ABLATIONS, LABELS, Run, load  # noqa: E402

READOUT_LABELS = {"own": "mean (the model's own), no MLP",
                  "cls": "[CLS] + train-time MLP (PyTorch's default init)",
                  "cls-simcse": "[CLS] + train-time MLP (SimCSE's init)"}
MLP_INITS = {"torch": "PyTorch's default", "simcse": "SimCSE's"}

# SIFTER variants set against the plain SIFTER run of the same seed and lr: (row, difference)
VARIANTS = {**{tag: (f"λ {weights}", f"λ {weights} − λ 1,1,1") for tag, weights in
               ABLATIONS.items()},
            "z-penn": ("Z by Penn tags (issue 25)", "Z by Penn tags − Z by UD tags")}


def mean_std(values) -> str:
    values = np.asarray(values, dtype=float)
    return f"{values.mean():.2f} ± {values.std(ddof=1):.2f}" if len(values) > 1 \
        else f"{values[0]:.2f}"


def row_label(run: Run, config: dict | None = None) -> str:
    """A row's name: objective, variant, lr, length, then the dropout and MLP init its record
    (`config`: summary.json's) says it trained with."""
    trained = training_label(config)
    if run.tag.startswith("dropout"):  # the record's dropout says it, when there is a record
        variant = "" if config else f", dropout {run.tag.removeprefix('dropout')}"
    else:
        variant = {"": "", "compute": ", SIFTER's compute"}.get(
            run.tag, f", {VARIANTS.get(run.tag, (run.tag,))[0]}")
    length = f"{run.steps} steps" if run.steps else "1 epoch"
    return f"{LABELS[run.objective]}{variant}, lr {run.lr:g}, {length}, {trained}"


def training_label(config: dict | None) -> str:
    """The dropout and the MLP's initial weights a record's config names ("not recorded"
    without one). A record with the MLP and no mlp_init predates --mlp-init, when the MLP had
    PyTorch's default init only."""
    if not config:
        return "dropout and MLP init not recorded"
    mlp = (f"MLP init {MLP_INITS[config.get('mlp_init', 'torch')]}" if config.get("mlp")
           else "no MLP")
    return f"dropout {config['dropout']:g}, {mlp}"


def seed_label(count: int) -> str:
    """How a difference row says what it rests on: paired seeds, or one seed."""
    return f"paired over {count} seeds" if count > 1 else "one seed"


def selection_scores(runs: list[dict], objective: str, tag: str = "") -> dict[float, float]:
    """lr -> best STS-B dev of the lowest-seed run of `objective` (plain, or the variant
    `tag`): what the `lr` part chooses on ({} when there are no such runs)."""
    plain = [r for r in runs if r["run"].objective == objective and r["run"].tag == tag]
    if not plain:
        return {}
    seed = min(r["run"].seed for r in plain)
    return {r["run"].lr: r["summary"]["best_stsb_dev"] for r in plain if r["run"].seed == seed}


def dev_choice(runs: list[dict], objective: str, tag: str = "") -> float | None:
    """The lr whose lowest-seed plain (or `tag`) run of `objective` has the best STS-B dev
    score: the `lr` part's choice, read from the runs present (dev only; None without any)."""
    scores = selection_scores(runs, objective, tag)
    return max(scores, key=scores.get) if scores else None


def run_rows(runs: list[dict], tasks: list[str], root: Path) -> tuple[list[str], dict]:
    """The untrained rows and one row per run group (mean ± std over its seeds)."""
    rows = []
    for start in ("mean", "cls"):  # the untrained model with either read-out
        base = root / f"base-{start}" / "results.json"
        if base.is_file():
            untrained = json.loads(base.read_text())
            rows.append(f"| untrained, {start} pooling | 1 | " + " | ".join(
                f"{untrained[t]:.2f}" for t in tasks) + " | | |")
    groups: dict[str, list[dict]] = {}
    for run in sorted(runs, key=lambda r: (r["run"].tag, r["run"].objective, r["run"].seed)):
        groups.setdefault(row_label(run["run"], run["summary"].get("config")), []).append(run)
    for label, members in groups.items():
        rows.append(f"| {label} | {len(members)} | " + " | ".join(
            mean_std([m["results"][t] for m in members]) for t in tasks)
            + f" | {mean_std([m['summary']['best_stsb_dev'] for m in members])} | "
            + mean_std([m["summary"]["history"][-1]["seconds_per_step"] for m in members])
            + " |")
    return rows, groups


def pair_rows(runs: list[dict], tasks: list[str]) -> list[str]:
    """The lr choice, then SIFTER − SimCSE paired by seed at the chosen and at equal lrs, then
    each SIFTER variant against its plain run."""
    by_key = {(r["run"].objective, r["run"].tag, r["run"].lr, r["run"].seed): r for r in runs}
    chosen = {o: dev_choice(runs, o) for o in ("sifter", "simcse")}
    rows, first = lr_choice_rows(runs, by_key, tasks, chosen)
    settings = [(first, chosen["sifter"], chosen["simcse"])]
    settings += [(f"both at lr {lr:g}", lr, lr) for lr in sorted({k[2] for k in by_key})
                 if (lr, lr) != (chosen["sifter"], chosen["simcse"])]
    for lr_label, sifter_lr, simcse_lr in settings:
        rows += difference_rows(runs, by_key, tasks, lr_label, sifter_lr, simcse_lr)
    return rows + variant_rows(by_key, tasks)


def dropout_tags(by_key: dict) -> list[str]:
    """The tags of the SimCSE dropout variants among the runs ("dropout0.1", ...)."""
    return sorted({k[1] for k in by_key if k[1].startswith("dropout")})


def lr_choice_rows(runs: list[dict], by_key: dict, tasks: list[str],
                   chosen: dict) -> tuple[list[str], str]:
    """The row saying which lr each objective chose on STS-B dev (none when nothing was chosen
    on these records), and how the pair rows at those lrs name them."""
    # an objective's lr was chosen when its seed-1 plain runs span more than one lr; else it
    # was given (`--chosen-lrs`: a rerun of some rows) and is labelled as given
    picked = {o: len(selection_scores(runs, o)) > 1 for o in chosen}
    names = {"sifter": "SIFTER", "simcse": "SimCSE"}
    if None in chosen.values():  # one objective's runs only (SIFTER on later views): no pair
        return [], ""
    if not any(picked.values()):  # one lr each: nothing was chosen
        first = (f"SIFTER at lr {chosen['sifter']:g}, SimCSE at {chosen['simcse']:g} (given, not "
                 "chosen on these records)") if chosen["sifter"] != chosen["simcse"] \
            else f"both at lr {chosen['sifter']:g}"
        return [], first
    choices = [(names[o], o, "") for o in chosen] + [
        (f"SimCSE at dropout {tag.removeprefix('dropout')}", "simcse", tag)
        for tag in dropout_tags(by_key)]

    def scores(objective: str, tag: str) -> str:
        found = selection_scores(runs, objective, tag)
        alone = "; the only lr in the records" if len(found) == 1 else ""
        return ", ".join(f"{dev:.2f} at {lr:g}" for lr, dev in sorted(found.items())) + alone

    def choice(name: str, objective: str, tag: str) -> str:
        lr = dev_choice(runs, objective, tag)
        if tag or picked[objective]:
            return f"{name} {lr:g} ({scores(objective, tag)})"
        dev = selection_scores(runs, objective)[lr]
        return f"{name} {lr:g} given ({dev:.2f} at {lr:g}, the only lr in the records)"

    said = "; ".join(choice(name, o, tag) for name, o, tag in choices)
    row = (f"| *lr chosen on STS-B dev of the seed-1 runs: {said}*"
           " | | " + " | " * len(tasks) + " | |")
    first = "each at its dev-chosen lr" if all(picked.values()) else ", ".join(
        f"{names[o]} at its dev-chosen lr {chosen[o]:g}" if picked[o] else
        f"{names[o]} at {chosen[o]:g} (given, not chosen on these records)" for o in chosen)
    return [row], first


def difference_rows(runs: list[dict], by_key: dict, tasks: list[str], lr_label: str,
                    sifter_lr: float, simcse_lr: float) -> list[str]:
    """SIFTER − SimCSE paired by seed, SIFTER at `sifter_lr` against SimCSE at `simcse_lr`
    (same steps, same compute) and, at the dev-chosen lrs, against SimCSE at its own dropout."""
    against = [("", "same steps", simcse_lr), ("compute", "same compute", simcse_lr)]
    if lr_label == "each at its dev-chosen lr":  # SimCSE at its own dropout: its own lr
        against += [(tag, f"SimCSE at dropout {tag.removeprefix('dropout')}",
                     dev_choice(runs, "simcse", tag)) for tag in dropout_tags(by_key)]
    rows = []
    for tag, label, against_lr in against:
        pairs = [(by_key[k], by_key[("simcse", tag, against_lr, k[3])])
                 for k in sorted(by_key) if k[:3] == ("sifter", "", sifter_lr)
                 and ("simcse", tag, against_lr, k[3]) in by_key]
        if pairs:
            diffs = np.array([[s["results"][t] - c["results"][t] for t in tasks]
                              for s, c in pairs])
            rows.append(f"| **SIFTER − SimCSE, {label}, {lr_label}, {seed_label(len(pairs))}"
                        f"** | {len(pairs)} | " + " | ".join(
                            mean_std(diffs[:, i]) for i in range(len(tasks))) + " | | |")
    return rows


def variant_rows(by_key: dict, tasks: list[str]) -> list[str]:
    """Each SIFTER variant (an ablation, Z by Penn tags) against the plain SIFTER run of the
    same seed and lr: one row per seed."""
    rows = []
    for tag, (_, difference) in VARIANTS.items():
        for key in sorted(k for k in by_key if k[:2] == ("sifter", tag)):
            plain = by_key.get(("sifter", "", *key[2:]))
            if plain is not None:
                variant = by_key[key]
                dev = variant["summary"]["best_stsb_dev"] - plain["summary"]["best_stsb_dev"]
                rows.append(f"| **{difference}, lr {key[2]:g}, seed {key[3]} (one seed)** | 1 | "
                            + " | ".join(f"{variant['results'][t] - plain['results'][t]:+.2f}"
                                         for t in tasks) + f" | {dev:+.2f} | |")
    return rows


# SIFTER's Table 2, BERT-base, average of the 7 STS tasks (SimCSE's figure as SimCSE reported it,
# at SimCSE's own dropout 0.1; SIFTER at 0.15)
PAPER_AVERAGES = {("simcse", "dropout0.1"): 76.25, ("sifter", ""): 78.20}


def paper_rows(runs: list[dict]) -> list[str]:
    """Each objective at its dev-chosen lr beside the paper's figure, and the paired gap."""
    def chosen(objective: str, tag: str) -> list[dict]:
        lr = dev_choice(runs, objective, tag)
        return sorted((r for r in runs if (r["run"].objective, r["run"].tag, r["run"].lr)
                       == (objective, tag, lr)), key=lambda r: r["run"].seed)

    rows = ["\nBeside the papers' figures (BERT-base in the papers; average of the 7 tasks, "
            "each objective at its dev-chosen lr):\n", "| model | runs | measured | paper |",
            "|---|---|---|---|"]
    measured = {}
    for (objective, tag) in [("simcse", "dropout0.1"), ("simcse", ""), ("sifter", "")]:
        members = chosen(objective, tag)
        if members:
            measured[objective, tag] = {m["run"].seed: m["results"]["avg"] for m in members}
            paper = PAPER_AVERAGES.get((objective, tag))
            label = f"{LABELS[objective]}, dropout {'0.1' if tag else '0.15'}"
            rows.append(f"| {label} | {len(members)} | "
                        f"{mean_std(list(measured[objective, tag].values()))} | "
                        f"{'' if paper is None else f'{paper:.2f}'} |")
    sifter, simcse = measured.get(("sifter", "")), measured.get(("simcse", "dropout0.1"))
    if sifter and simcse and set(sifter) & set(simcse):
        seeds = sorted(set(sifter) & set(simcse))
        gap = PAPER_AVERAGES["sifter", ""] - PAPER_AVERAGES["simcse", "dropout0.1"]
        rows.append(f"| **SIFTER − SimCSE at dropout 0.1, {seed_label(len(seeds))}** | "
                    f"{len(seeds)} | {mean_std([sifter[s] - simcse[s] for s in seeds])} | "
                    f"{gap:+.2f} |")
    return rows


def curve_lines(groups: dict[str, list[dict]]) -> list[str]:
    lines = ["\nSTS-B dev / mean training loss at each evaluation (mean over a row's runs; step 0"
             " is the initial model):\n"]
    for label, members in groups.items():
        steps = [r["step"] for r in members[0]["summary"]["history"]]
        dev = np.mean([[r["stsb_dev"] for r in m["summary"]["history"]] for m in members], axis=0)
        loss = np.mean([[r["loss"] for r in m["summary"]["history"]] for m in members], axis=0)
        curve = ", ".join(f"{s}: {d:.2f} / {v:.2g}" for s, d, v in zip(steps, dev, loss,
                                                                         strict=True))
        lines.append(f"- {label}: 0: {members[0]['summary']['initial_stsb_dev']:.2f}; {curve}")
    return lines


def views_of(run: dict) -> str:
    """Which views a SIFTER run trained on, from its record's input settings: the job's
    `views_revision` (issue 43 on), else the first study's (a7babc3's, before issues 36 and 43)."""
    revision = (run["summary"].get("input_settings") or {}).get("views_revision")
    return f"views revision {revision}" if revision else "a7babc3's views"


def views_rows(runs: list[dict], later: list[dict], tasks: list[str]) -> list[str]:
    """SIFTER on each set of views against the same SimCSE runs (SimCSE reads X only), paired
    by seed: SIFTER at each lr `later` has, SimCSE at its dev-chosen lr and at the same lr; then
    the later views' SIFTER − the earlier views' SIFTER, same seed and lr."""
    by_key = {(r["run"].objective, r["run"].tag, r["run"].lr, r["run"].seed): r for r in runs}
    new = {(r["run"].lr, r["run"].seed): r for r in later
           if (r["run"].objective, r["run"].tag) == ("sifter", "")}
    chosen = dev_choice(runs, "simcse")
    rows = []
    for lr in sorted({k[0] for k in new}):
        against = [(chosen, f"SimCSE at its dev-chosen lr {chosen:g}")] if chosen else []
        against += [(lr, f"SimCSE at lr {lr:g}")] if lr != chosen else []
        old = {k: by_key.get(("sifter", "", *k)) for k in new}  # the earlier views' SIFTER
        for simcse_lr, said in against:
            for sifter in (old, new):
                pairs = [(sifter[k], by_key[("simcse", "", simcse_lr, k[1])])
                         for k in sorted(new) if k[0] == lr and sifter.get(k) is not None
                         and ("simcse", "", simcse_lr, k[1]) in by_key]
                if pairs:
                    rows.append(difference_line(
                        f"SIFTER on {views_of(pairs[0][0])} at lr {lr:g} − {said}", pairs,
                        tasks))
        pairs = [(new[k], by_key[("sifter", "", *k)]) for k in sorted(new)
                 if k[0] == lr and ("sifter", "", *k) in by_key]
        if pairs:
            rows.append(difference_line(
                f"SIFTER on {views_of(pairs[0][0])} − SIFTER on {views_of(pairs[0][1])}, "
                f"lr {lr:g}", pairs, tasks))
    return rows


def difference_line(label: str, pairs: list[tuple[dict, dict]], tasks: list[str]) -> str:
    """A row of the first run minus the second of each pair, mean ± std over the pairs."""
    diffs = np.array([[a["results"][t] - b["results"][t] for t in tasks] for a, b in pairs])
    return (f"| **{label}, {seed_label(len(pairs))}** | {len(pairs)} | "
            + " | ".join(mean_std(diffs[:, i]) for i in range(len(tasks))) + " | | |")


def views_section(args, readout: str, runs: list[dict], tasks: list[str]) -> list[str]:
    """For each folder of `--views-records` with SIFTER runs of `readout`: its runs and the
    paired differences of `views_rows` (nothing where there are no such records yet)."""
    from sentray.evaluation.sts import SHORT_NAMES

    out, before = [], []
    for folder in getattr(args, "views_records", None) or []:
        later = [load(p.parent) for p in sorted(Path(folder).glob(f"{readout}/*/results.json"))]
        if not later:
            continue
        out.append(f"\nSIFTER on the views of {views_of(later[0])} ({Path(folder).name}/; "
                   "SimCSE's runs above, which read X only):\n")
        out.append("| model | runs | " + " | ".join(SHORT_NAMES.get(t, t) for t in tasks)
                   + " | STS-B dev (best) | s/step |")
        out.append("|" + "---|" * (len(tasks) + 4))
        rows, _ = run_rows(later, tasks, Path(folder))
        out += rows + views_rows(runs, later, tasks)
        out += [row for earlier in before for row in later_views_rows(earlier, later, tasks)]
        before.append(later)
    return out


def later_views_rows(earlier: list[dict], later: list[dict], tasks: list[str]) -> list[str]:
    """The later views' SIFTER − an earlier --views-records folder's, paired by lr and seed."""
    old = {(r["run"].lr, r["run"].seed): r for r in earlier
           if (r["run"].objective, r["run"].tag) == ("sifter", "")}
    new = {(r["run"].lr, r["run"].seed): r for r in later
           if (r["run"].objective, r["run"].tag) == ("sifter", "")}
    rows = []
    for lr in sorted({k[0] for k in new}):
        pairs = [(new[k], old[k]) for k in sorted(new) if k[0] == lr and k in old]
        if pairs:
            rows.append(difference_line(f"SIFTER on {views_of(pairs[0][0])} − SIFTER on "
                                        f"{views_of(pairs[0][1])}, lr {lr:g}", pairs, tasks))
    return rows


def tables(args) -> str:
    """The Markdown tables of docs/results.md from the run records under --records."""
    from sentray.evaluation.sts import SHORT_NAMES

    root = Path(args.records)
    out = []
    for readout in args.readouts:
        runs = [load(p.parent) for p in sorted(root.glob(f"{readout}/*/results.json"))]
        if not runs:
            continue
        tasks = list(runs[0]["results"])
        out.append(f"\n#### Read-out: {READOUT_LABELS[readout]}\n")
        out.append("| model | runs | " + " | ".join(SHORT_NAMES.get(t, t) for t in tasks)
                   + " | STS-B dev (best) | s/step |")
        out.append("|" + "---|" * (len(tasks) + 4))
        rows, groups = run_rows(runs, tasks, root)
        out += rows + pair_rows(runs, tasks) + curve_lines(groups)
        out += views_section(args, readout, runs, tasks)
        if getattr(args, "paper", False):
            out += paper_rows(runs)
    return "\n".join(out).strip("\n")

