"""Every job run on small inputs through its command line, and what it wrote reduced to digests:
run once before a change that must not change behaviour and once after, then compare.

    python bench/same_outputs.py --out before.json
    ... change the code ...
    python bench/same_outputs.py --out after.json
    python bench/same_outputs.py --compare before.json after.json

(issue 37's three records: bench/results/same-outputs-37-*.json). The runs (2.5-4 minutes on 2
cores): embed on the bundled sample in the job's own process
(the defaults) and on Ray (Ditto, int8, long texts chunked), augment on 300 sample rows, train
SIFTER-SimCSE for 4 steps on that output, evaluate the trained model and a pooling of the
packaged one on 2 tasks, train the SIFTER-LSTM for a few steps. Each output file is digested:
the Parquet files of a folder by their rows in (source, row) order, however they fell into files,
JSON without what changes from run to run (times, dates, the work folder's path), weights by
their bytes. Both runs on one machine: the
digests are exact, so a difference is a behaviour change (or a kernel's: do not compare across
machines).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import yaml

ROOT = Path(__file__).resolve().parents[1]
DATA = os.environ.get("SENTRAY_DATA_DIR", str(ROOT.parent / "shared" / "data" / "senteval"))

# JSON keys whose values change from run to run of the same code (clocks, the machine's load)
VOLATILE = {"seconds", "timings", "started", "started_at", "finished", "finished_at", "date",
            "time", "wall_s", "runs", "run", "rows_per_second", "elapsed", "duration", "host",
            "pid", "since_launch", "written_at", "updated", "created", "python", "versions",
            "throughput", "sentences_per_second", "steps_per_second", "step_seconds", "cpu",
            "platform", "hostname", "ray_start", "seconds_per_step", "tokens_per_second"}
# an input file's folder is named after it and a digest of its URI (the work folder's path)
SOURCE_KEY = re.compile(r"-[0-9a-f]{10}(?=/|$)")
VECTORS = b"sentray.vectors"  # the embedding job's description of its vectors, in every file


def jobs(work: Path) -> list[tuple[str, list[str], list[str]]]:
    """(name, command, output folders) in order: later jobs read earlier outputs."""
    sample = work / "sample300.txt"
    sample.write_text("".join((ROOT / "sentray/data/sample.txt").read_text()
                              .splitlines(keepends=True)[:300]))
    py = [sys.executable]
    return [
        ("embed-defaults", py + ["jobs/embed.py", "--output", f"{work}/embed"], ["embed"]),
        ("embed-ray-ditto-int8-chunk",
         py + ["jobs/embed.py", "--output", f"{work}/embed-ray", "--in-process-rows", "0",
               "--pooling", "ditto", "--head", "4-2", "--output-dtype", "int8",
               "--long-text", "chunk", "--max-length", "24", "--actors", "2",
               "--num-cpus", "4"], ["embed-ray"]),
        ("augment", py + ["jobs/augment.py", "--input", str(sample), "--output",
                          f"{work}/aug", "--rejects", f"{work}/rej", "--actors", "1",
                          "--num-cpus", "4"], ["aug", "rej"]),
        ("train", py + ["jobs/train.py", "--input", f"{work}/aug", "--output", f"{work}/train",
                        "--max-steps", "4", "--eval-steps", "2", "--batch-size", "8",
                        "--workers", "1", "--num-cpus", "4", "--data-dir", DATA], ["train"]),
        ("evaluate-trained", py + ["jobs/evaluate.py", "--model", f"{work}/train/best",
                                   "--tasks", "STS12,STSBenchmark", "--max-pairs", "200",
                                   "--output", f"{work}/eval-trained", "--data-dir", DATA],
         ["eval-trained"]),
        ("evaluate-first-last", py + ["jobs/evaluate.py", "--pooling", "first_last_avg",
                                      "--tasks", "STS12,SICKRelatedness", "--max-pairs", "200",
                                      "--output", f"{work}/eval-fl", "--data-dir", DATA],
         ["eval-fl"]),
        ("train-lstm", py + ["jobs/train_lstm.py", "--cell", "sifter", "--limit-train", "300",
                             "--limit-eval", "100", "--max-steps", "6", "--output",
                             f"{work}/lstm", "--data-dir", DATA], ["lstm"]),
    ]


def stable(value, work: str):
    """`value` without VOLATILE keys, the work folder's path replaced by WORK (and this tree's,
    where the bundled sample lies, by ROOT)."""
    if isinstance(value, dict):
        return {k: stable(v, work) for k, v in value.items() if k not in VOLATILE}
    if isinstance(value, list):
        return [stable(v, work) for v in value]
    if isinstance(value, str):
        return value.replace(work, "WORK").replace(str(ROOT), "ROOT")
    return value


def digest_rows(paths: list[Path], work: str) -> str:
    """The rows of Parquet files (one folder's parts) as one table in (source, row) order, and
    the description of its vectors (`sentray.vectors`): not how the rows fell into files, which
    follows the blocks' timing, nor each part's own counts."""
    tables = [pq.read_table(path) for path in paths]
    table = pa.concat_tables([t.replace_schema_metadata(None) for t in tables],
                             promote_options="permissive")
    if {"source", "row"} <= set(table.column_names):
        table = table.sort_by([("source", "ascending"), ("row", "ascending")])
    hashed = hashlib.sha256()
    for name in table.column_names:
        column = table.column(name).to_pylist()
        if name == "source":  # the input file's key: its name and a digest of its URI
            column = [SOURCE_KEY.sub("-KEY", v) if isinstance(v, str) else v for v in column]
        hashed.update(name.encode() + json.dumps(column, default=str).encode())
    described = {json.dumps(stable(json.loads(t.schema.metadata[VECTORS]), work), sort_keys=True)
                 for t in tables if VECTORS in (t.schema.metadata or {})}
    for text in sorted(described):
        hashed.update(text.encode())
    return hashed.hexdigest()[:16]


def digest_file(path: Path, work: str) -> str:
    """A JSON file without VOLATILE keys, a YAML config as its flags and values (in any order:
    nesting a config's groups moves its lines, not what they say), a text file with the paths
    replaced, else the bytes."""
    data = path.read_bytes()
    if path.suffix in (".json", ".jsonl", ".yaml", ".txt", ".md", ".csv"):
        text = data.decode()
        if path.suffix == ".json":
            try:
                text = json.dumps(stable(json.loads(text), work), sort_keys=True)
            except ValueError:
                pass
        elif path.suffix == ".yaml":  # a job's _config.yaml: its flags, not their order
            comment = "".join(line + "\n" for line in text.splitlines() if line.startswith("#"))
            text = comment + json.dumps(yaml.safe_load(text), sort_keys=True, default=str)
        data = text.replace(work, "WORK").replace(str(ROOT), "ROOT").encode()
    return hashlib.sha256(data).hexdigest()[:16]


def digest_folder(folder: Path, work: str) -> dict[str, str]:
    """File -> digest; the Parquet files of one folder (the parts of one input file) together."""
    out: dict[str, str] = {}
    parts: dict[str, list[Path]] = {}
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        rel = str(path.relative_to(folder))
        if ".lock" in rel or "_claims" in rel or rel.endswith((".log", ".pid")):
            continue
        if path.name.startswith("events.") or "ray_results" in rel or "checkpoint_" in rel:
            continue
        if path.suffix == ".parquet":
            parts.setdefault(str(path.parent.relative_to(folder)), []).append(path)
        else:
            out[SOURCE_KEY.sub("-KEY", rel)] = digest_file(path, work)
    for parent, files in parts.items():
        rows = sum(pq.read_metadata(f).num_rows for f in files)
        out[f"{SOURCE_KEY.sub('-KEY', parent)}/*.parquet ({rows} rows)"] = digest_rows(files, work)
    return out


def run_all(work: Path, run: bool = True) -> dict:
    """Every job run (unless `run` is False: the outputs already in `work` digested again)."""
    record = {"python": sys.version.split()[0], "jobs": {}}
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "SENTRAY_DATA_DIR": DATA,
           "PYTHONPATH": str(ROOT)}  # this tree's sentray, whatever is installed
    for name, command, folders in jobs(work):
        started = time.time()
        done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True) \
            if run else None
        if done is not None and done.returncode != 0:
            sys.exit(f"{name} failed ({done.returncode}):\n{done.stderr[-4000:]}")
        files = {}
        for folder in folders:
            for rel, digest in digest_folder(work / folder, str(work)).items():
                files[f"{folder}/{rel}"] = digest
        record["jobs"][name] = {"command": " ".join(command[1:]).replace(str(work), "WORK"),
                                "files": files}
        print(f"{name}: {len(files)} files, {time.time() - started:.0f} s", flush=True)
    return record


def compare(before: dict, after: dict) -> int:
    differences = 0
    for name in sorted(set(before["jobs"]) | set(after["jobs"])):
        a = before["jobs"].get(name, {}).get("files", {})
        b = after["jobs"].get(name, {}).get("files", {})
        changed = sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k))
        differences += len(changed)
        print(f"{name}: {len(a)} files, {'equal' if not changed else 'DIFFERENT: ' + ', '.join(changed)}")
    return 1 if differences else 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", help="write the digests here (JSON)")
    parser.add_argument("--work", help="keep the outputs here (default: a temporary folder)")
    parser.add_argument("--compare", nargs=2, metavar=("BEFORE", "AFTER"))
    parser.add_argument("--no-run", action="store_true",
                        help="digest the outputs already in --work again, run nothing")
    args = parser.parse_args()
    if args.compare:
        sys.exit(compare(*(json.loads(Path(p).read_text()) for p in args.compare)))
    with tempfile.TemporaryDirectory() as temporary:
        work = Path(args.work or temporary)
        work.mkdir(parents=True, exist_ok=True)
        record = run_all(work, run=not args.no_run)
    record["commit"] = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT,
                                      capture_output=True, text=True).stdout.strip()
    text = json.dumps(record, indent=1, sort_keys=True)
    if args.out:
        Path(args.out).write_text(text + "\n")
    print(text if not args.out else f"written: {args.out}")


if __name__ == "__main__":
    main()
