"""The embedding job on a local autoscaling cluster, and on fixed clusters of 1, 2 and 3 worker
nodes, on this machine (`sentray.testing.autoscaling_cluster`: cluster.yaml's CPU worker type scaled
down, a head that takes no work, Ray's autoscaler and fake multi-node provider).

1. Autoscaled: `jobs/embed.py --actors 1-3 --shared-paths` submitted through the Jobs API to a
   cluster at rest (no worker node); every second, the worker nodes alive, the pool's actors
   alive and the rows written (`ClusterTimeline`), from the submit until the idle workers are
   removed. Plotted as docs/figures/autoscale.png.
2. Fixed: the same job on clusters whose CPU worker type has min = max = k nodes (k = 1, 2, 3,
   each started and waited for before the submit), `--actors k`: rows/s of the pipeline (the
   job's own timing, from the first read to the last part) and of the whole submit.

On a 2-core machine every node shares the same two cores: the fixed runs show what more nodes
cost, not what they gain (docs/cluster.md gives the law for a real cluster).

    python bench/bench_autoscale.py --out bench/results/autoscale.json
    python bench/bench_autoscale.py --plot-only --out bench/results/autoscale.json
"""

from __future__ import annotations

import argparse
import json
import logging
import platform
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from sentray.testing.autoscaling_cluster import LocalAutoscalingCluster
from sentray.testing.cluster_timeline import ClusterTimeline
from sentray.testing.cluster_types import LocalNodeTypes

ROOT = Path(__file__).resolve().parents[1]
BROWN = ROOT.parent / "shared/data/corpus/brown.txt"
FIGURE = ROOT / "docs/figures/autoscale.png"
IDLE_TIMEOUT_S = 15.0


def write_corpus(rows: int, folder: Path) -> Path:
    """The first `rows` Brown sentences (repeated past its 55,042), one a line."""
    lines = BROWN.read_text().splitlines()
    path = folder / f"brown-{rows}.txt"
    path.write_text("".join(f"{lines[i % len(lines)]}\n" for i in range(rows)))
    return path


def rows_written_counter(corpus: Path, output: Path) -> Callable[[], int]:
    """Rows of `corpus` in `output` so far, from the part names (as the job's progress does)."""
    from sentray.corpus.row_progress import rows_written
    from sentray.corpus.sources import CorpusConfig, discover_sources
    from sentray.kit import storage

    key = discover_sources(CorpusConfig(input=str(corpus)))[0].key
    folder = storage.locate(str(output))
    return lambda: rows_written([folder], key) if output.exists() else 0


def node_types(min_workers: int, max_workers: int) -> LocalNodeTypes:
    types = LocalNodeTypes.from_cluster_yaml(ROOT / "cluster.yaml", only=("cpu_worker",),
                                             cpus_per_worker=2, max_workers=max_workers,
                                             idle_timeout_s=IDLE_TIMEOUT_S)
    types.workers["cpu_worker"]["min_workers"] = min_workers
    return types


def job_args(corpus: Path, output: Path, actors: str, extra: list[str]) -> list[str]:
    return ["python", "jobs/embed.py", "--input", str(corpus), "--output", str(output),
            "--actors", actors, "--shared-paths", "--rows-per-file", "0", *extra]


def summary_of(output: Path) -> dict:
    return json.loads((output / "_summary.json").read_text())


def autoscaled_run(corpus: Path, scratch: Path, extra: list[str]) -> dict:
    """The job on a cluster at rest, sampled every second until its workers are gone."""
    output = scratch / "autoscaled"
    with LocalAutoscalingCluster(node_types(0, 3), scratch / "ray-a") as cluster:
        timeline = ClusterTimeline(cluster, actor_name="EmbedBatch",
                                   rows=rows_written_counter(corpus, output),
                                   on_change=lambda s, m: print(f"{s.t:6.1f} s  {m}", flush=True))
        with timeline:
            submitted = time.monotonic()
            done = cluster.submit(*job_args(corpus, output, "1-3", extra))
            job_end = round(time.monotonic() - submitted, 1)
            if done.returncode != 0:
                raise RuntimeError(f"the job failed:\n{(done.stdout + done.stderr)[-4000:]}")
            cluster.wait_for_workers(0, timeout=IDLE_TIMEOUT_S + 180)
            time.sleep(2)  # a sample or two of the cluster back at rest
        placed = [a["node_id"] for a in cluster.all_actors("EmbedBatch") if a["node_id"]]
        head = cluster.head_node_id()
    summary = summary_of(output)
    first = timeline.first(lambda s: s.worker_count > 0)
    gone = next((s.t for s in timeline.samples if s.t > job_end and s.worker_count == 0), None)
    return {"rows": summary["rows_in"], "rows_out": summary["rows_out"],
            "job_end_s": job_end, "first_worker_s": first.t if first else None,
            "workers_gone_s": gone, "max_workers": timeline.max_workers(),
            "max_actors": timeline.max_actors(), "actors_placed": len(placed),
            "actors_on_head": placed.count(head), "job_seconds": summary["seconds"],
            "timings": summary.get("timings"), "settings": _settings(summary),
            "samples": timeline.to_json()}


def fixed_run(workers: int, corpus: Path, scratch: Path, extra: list[str]) -> dict:
    """The job with `--actors workers` on a cluster of `workers` CPU worker nodes, all up."""
    output = scratch / f"fixed-{workers}"
    with LocalAutoscalingCluster(node_types(workers, workers), scratch / f"ray-{workers}") \
            as cluster:
        waited = cluster.wait_for_workers(workers, timeout=300)
        submitted = time.monotonic()
        done = cluster.submit(*job_args(corpus, output, str(workers), extra))
        wall = time.monotonic() - submitted
        if done.returncode != 0:
            raise RuntimeError(f"the job failed:\n{(done.stdout + done.stderr)[-4000:]}")
        nodes = {a["node_id"] for a in cluster.all_actors("EmbedBatch") if a["node_id"]}
    summary = summary_of(output)
    pipeline = summary["timings"]["pipeline"]
    row = {"worker_nodes": workers, "actors": workers, "nodes_with_actors": len(nodes),
           "rows": summary["rows_in"], "pipeline_s": pipeline,
           "rows_per_s_pipeline": round(summary["rows_in"] / pipeline, 1),
           "submit_to_done_s": round(wall, 1),
           "rows_per_s_submit": round(summary["rows_in"] / wall, 1),
           "nodes_started_in_s": round(waited, 1), "first_part_s": summary["timings"].get(
               "first_part"), "settings": _settings(summary)}
    print(json.dumps(row), flush=True)
    return row


def _settings(summary: dict) -> dict:
    """What the vectors were made with (the job's settings record): model, pooling, precision."""
    settings = summary.get("settings") or {}
    return {key: settings.get(key) for key in ("model", "pooling", "precision", "dimension")}


def plot(record: dict, figure: Path) -> None:
    """Worker nodes, actors and rows written over time, from the record's samples."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    run = record["autoscaled"]
    samples = run["samples"]
    t = [s["t"] for s in samples]
    fig, axes = plt.subplots(3, 1, sharex=True, figsize=(8, 6.5))
    series = [([sum(s["workers"].values()) for s in samples], "worker nodes alive"),
              ([s["actors"] for s in samples], "actors in the pool"),
              ([s["rows"] or 0 for s in samples], "rows written")]
    for axis, (values, label) in zip(axes, series, strict=True):
        if label == "rows written":
            axis.plot(t, values)
        else:
            axis.step(t, values, where="post")
        axis.set_ylabel(label)
        axis.axvline(run["job_end_s"], color="grey", linestyle="--", linewidth=0.8)
        axis.grid(alpha=0.3)
    axes[0].set_yticks(range(0, max(series[0][0]) + 2))
    axes[1].set_yticks(range(0, max(series[1][0]) + 2))
    axes[2].set_xlabel("seconds since `ray job submit` (dashed: the job's end)")
    config = record["config"]
    fig.suptitle(f"jobs/embed.py --actors 1-3 on {run['rows']:,} rows, local autoscaling "
                 f"cluster\n(cpu_worker: {config['cpus_per_worker']} CPUs, 0-3 nodes, idle "
                 f"timeout {config['idle_timeout_s']:.0f} s; one 2-core machine)", fontsize=10)
    fig.tight_layout()
    figure.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(figure, dpi=110)
    print(f"wrote {figure}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=20_000, help="rows of the autoscaled run")
    parser.add_argument("--fixed-rows", type=int, default=10_000, help="rows of each fixed run")
    parser.add_argument("--fixed", default="1,2,3", help="worker nodes of the fixed runs")
    parser.add_argument("--job-args", default="", help="more flags for jobs/embed.py")
    parser.add_argument("--out", type=Path, default=ROOT / "bench/results/autoscale.json")
    parser.add_argument("--figure", type=Path, default=FIGURE)
    parser.add_argument("--plot-only", action="store_true", help="redraw from --out")
    args = parser.parse_args()
    if args.plot_only:
        plot(json.loads(args.out.read_text()), args.figure)
        return
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    extra = args.job_args.split()
    with tempfile.TemporaryDirectory(prefix="bas-", dir="/tmp") as scratch:
        scratch = Path(scratch)
        record = {"config": {"cpus_per_worker": 2, "idle_timeout_s": IDLE_TIMEOUT_S,
                             "job_args": extra, "cores": _cores(),
                             "machine": platform.platform()},
                  "autoscaled": autoscaled_run(write_corpus(args.rows, scratch), scratch,
                                               extra)}
        fixed_corpus = write_corpus(args.fixed_rows, scratch)
        record["fixed"] = [fixed_run(int(k), fixed_corpus, scratch, extra)
                           for k in args.fixed.split(",")]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(record, indent=1))
    print(f"wrote {args.out}")
    plot(record, args.figure)


def _cores() -> int:
    import os

    return len(os.sched_getaffinity(0))


if __name__ == "__main__":
    main()
