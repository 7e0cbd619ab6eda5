"""`make cluster-demo`: an autoscaling Ray cluster on this machine, the embedding job submitted to
it the way users submit jobs, the worker nodes printed as they come and go, the cluster torn
down.

The cluster is cluster.yaml's, scaled down (`sentray.testing.cluster_types.LocalNodeTypes`): a head
with no CPU for work, the CPU and GPU worker types from min_workers 0, launched and removed by
Ray's own autoscaler through its fake multi-node provider, every process on 127.0.0.1 and ended
by this script alone (`sentray.testing.autoscaling_cluster`; never `ray stop`, which would end
every Ray on the machine). The job: the bundled 1,000-sentence sample (or --input) through
`jobs/embed.py --actors 1-3 --shared-paths` (one machine's disk is shared by its fake nodes).

    python bench/cluster_demo.py [--input FILE] [--job-args "--model DIR --pooling mean"]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from sentray.testing.autoscaling_cluster import LocalAutoscalingCluster
from sentray.testing.cluster_timeline import ClusterTimeline
from sentray.testing.cluster_types import LocalNodeTypes

ROOT = Path(__file__).resolve().parents[1]


def say(started: float, message: str) -> None:
    print(f"[{time.monotonic() - started:6.1f} s] {message}", flush=True)


def run_job(cluster: LocalAutoscalingCluster, entrypoint: list[str], started: float) -> int:
    """Submit, echo the job's log lines (prefixed), return the submit's exit status."""
    command = cluster.submit_command(*entrypoint)
    say(started, "ray job submit --address " + cluster.dashboard_url + " --working-dir . -- "
        + " ".join(entrypoint))
    with subprocess.Popen(command, env=cluster.env, cwd=ROOT, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True) as job:
        for line in job.stdout:
            if "sentray" in line or line.startswith("{") or "succeeded" in line \
                    or "failed" in line or "error" in line.lower():
                print(f"    job | {line.rstrip()}", flush=True)
    return job.returncode


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--input", help="corpus (default: the bundled 1,000-sentence sample)")
    parser.add_argument("--actors", default="1-3", help="the pool: N or MIN-MAX")
    parser.add_argument("--job-args", default="", help="more flags for jobs/embed.py")
    parser.add_argument("--idle-timeout", type=float, default=15.0,
                        help="seconds before an idle worker node is removed")
    args = parser.parse_args()
    types = LocalNodeTypes.from_cluster_yaml(ROOT / "cluster.yaml", cpus_per_worker=2,
                                             max_workers=2, idle_timeout_s=args.idle_timeout)
    kinds = ", ".join(f"{name} {w['resources']} x {w['min_workers']}-{w['max_workers']}"
                      for name, w in types.workers.items())
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="ray-demo-", dir="/tmp") as scratch:
        output = Path(scratch) / "embeddings"
        say(started, f"starting a local autoscaling cluster: head {types.head}, workers {kinds}")
        with LocalAutoscalingCluster(types, Path(scratch) / "ray") as cluster:
            say(started, f"up: {len(cluster.nodes())} node (the head); Jobs API "
                f"{cluster.dashboard_url}")
            timeline = ClusterTimeline(cluster, actor_name="EmbedBatch",
                                       on_change=lambda s, m: say(started, m))
            with timeline:
                entrypoint = ["python", "jobs/embed.py", "--output", str(output), "--actors",
                              args.actors, "--shared-paths", *args.job_args.split()]
                if args.input:
                    entrypoint[2:2] = ["--input", args.input]
                status = run_job(cluster, entrypoint, started)
                say(started, f"job {'succeeded' if status == 0 else 'FAILED'}; waiting for "
                    f"the idle workers to go ({args.idle_timeout:.0f} s idle timeout)")
                cluster.wait_for_workers(0, timeout=args.idle_timeout + 180)
            say(started, "tearing the cluster down (its own processes only)")
        say(started, "done")
    return status


if __name__ == "__main__":
    sys.exit(main())
