"""The one command line of every job: `sentray <job> [flags]` and `python jobs/<job>.py [flags]`.

Each job's flags come from its config dataclass (nested configs included) through tyro: a field
`batch_size: int = 32  # sentences per forward pass` is `--batch-size INT` with that help and
that default, so every default and every help line is written once, beside the field. Nested
configs (an embed job's corpus, encoder and actor pool) become groups of flags without a prefix.

Why tyro: it turns dataclasses, `Literal`s and `X | None` into typed flags with help taken from
the fields' own comments, and it keeps the dataclass's `__post_init__` as the one validator. (We
use argparse's dash spelling for flags; jsonargparse would name them `--batch_size` and nest the
groups as `--encoder.batch_size`.) The few types we spell our own way, and one default per flag
in `--help`: `sentray.kit.flag_types`.

A job also takes `--config FILE.yaml`: flat `key: value` lines named like the flags
(`batch_size: 16` for `--batch-size 16`), read into the default instance that the flags given
then override. A job writes the configuration it ran with to `OUTPUT/_config.yaml`
(`sentray.kit.config_files`): the same command with `--config OUTPUT/_config.yaml` repeats the
run. The config holds what was typed; what depends on the model is decided by the job's plan.

Every command behaves like a Unix tool (`command`): exit status 0 after a job that succeeded,
its brief result on stdout; otherwise one `error: ...` line on stderr (the traceback only with
--verbose) and an exit status that says what happened: 2 bad input, 1 a failed job, 130 an
interrupt (`sentray.kit.exit_status` decides which).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import json
import logging
import re
import sys
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, Generic, TypeVar

import tyro

from sentray.kit import config_files
from sentray.kit.config_files import build_config, flat_fields, read_config_file
from sentray.kit.exit_status import (
    BAD_INPUT,
    BAD_INPUT_STATUS,
    INTERRUPTED_STATUS,
    CommandError,
    command_error,
    one_line,
)
from sentray.kit.flag_types import REGISTRY
from sentray.kit.output_folder import OutputFolder
from sentray.kit.ray_quiet import quiet_libraries

C = TypeVar("C")


@dataclass(frozen=True)
class _Command(Generic[C]):
    options: Annotated[C, tyro.conf.arg(name="")]
    config: str | None = None  # YAML of flags as keys (batch_size: 16), overridden by flags given

    # debug logging, and Ray's own log lines in this job's output
    verbose: Annotated[bool, tyro.conf.arg(aliases=("-v",)), tyro.conf.FlagCreatePairsOff] = False


def renamed_flags(config_type: type, argv: list[str]) -> list[str]:
    """`argv` with the old spellings of renamed flags replaced, each with a one-line notice on
    stderr: `--out` of evaluate and train_lstm is `--output`, as in every other job."""
    fields = flat_fields(config_type)
    out = []
    for arg in argv:
        flag, equals, value = arg.partition("=")
        new = config_files.RENAMED.get(flag[2:].replace("-", "_")) if flag.startswith("--") \
            else None
        if new is not None and new in fields and flag[2:] not in fields:
            print(f"warning: {flag} is deprecated; use --{new.replace('_', '-')}",
                  file=sys.stderr)
            arg = f"--{new.replace('_', '-')}{equals}{value}"
        out.append(arg)
    return out


def parse(config_type: type[C], argv: Sequence[str] | None, *, description: str,
          prog: str | None = None) -> tuple[C, bool]:
    """(config, verbose) from the command line `argv` (default: sys.argv[1:]), on top of the
    options of `--config FILE` if given; the config resolved. Bad values exit with a message
    naming them: tyro's for a flag that does not parse, the config's own for a value it
    rejects."""
    argv = list(sys.argv[1:] if argv is None else argv)
    pre = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    pre.add_argument("--config")
    known, rest = pre.parse_known_args(argv)
    switches = [name.replace("_", "-") for name, hint in flat_fields(config_type).items()
                if hint == bool | None]
    rest = [f"--{arg[5:]}=false" if arg.startswith("--no-") and arg[5:] in switches else arg
            for arg in rest]  # --no-mlp: the usual spelling of --mlp false
    rest = renamed_flags(config_type, rest)
    try:
        default = None
        if known.config:
            options = build_config(config_type, read_config_file(config_type, known.config))
            default = _Command(options=options, config=known.config)
        with _one_line_errors():
            command = tyro.cli(_Command[config_type], args=rest, prog=prog, default=default,
                               description=description, registry=REGISTRY,
                               config=(tyro.conf.OmitArgPrefixes,))
        config = command.options
        if hasattr(config, "resolved"):  # defaults that depend on other flags (a trainer's)
            config = config.resolved()
    except (ValueError, OSError) as exc:  # a config's __post_init__ or file: bad values
        raise CommandError(f"error: {one_line(str(exc))}", BAD_INPUT_STATUS) from exc
    return config, command.verbose


def _one_line_errors():
    """While tyro parses: a value the config refuses, a value that does not parse, a choice
    not offered or a flag not known is said in one `error: ...` line on stderr, exit status 2
    (tyro would draw a box). Through tyro's parse-error hook where this tyro has it; any other
    failure keeps tyro's own report."""
    hooks = getattr(getattr(tyro, "_errors", None), "on_parse_error", None)
    if hooks is None:
        return contextlib.nullcontext()

    def one_line(event) -> None:
        kind = type(event).__name__
        lowered = getattr(getattr(event, "argument", None), "lowered", None)
        flag = ", ".join(getattr(lowered, "name_or_flags", None) or ()) or "a value"
        message = str(getattr(event, "message", ""))
        line = {
            # a value that does not parse is not named by its message: the flag is said
            "InstantiationFailure": lambda: message if flag == "a value" or flag in message
            else f"{flag}: {message}",
            "BadValue": lambda: f"{flag}: {getattr(event, 'reason', 'not a valid value')}",
            "InvalidChoice": lambda: f"{flag} must be one of "
                                     f"{', '.join(map(str, getattr(event, 'choices', ())))}, "
                                     f"got {getattr(event, 'value', '')!r}",
            "UnrecognizedArgs": lambda: "unrecognized arguments: "
                                        + " ".join(getattr(event, "tokens", ())),
        }.get(kind)
        if line is not None and (text := " ".join(str(line()).split())):
            print(f"error: {text}", file=sys.stderr)
            raise SystemExit(BAD_INPUT_STATUS)

    return hooks(one_line)


def setup_logging(verbose: bool = False) -> None:
    """Configure logging for a job process (never at import time: it would run on workers)."""
    logging.basicConfig(
        level=logging.DEBUG if verbose else logging.INFO, stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s", force=True)
    quiet_libraries()  # unless verbose: no Hugging Face progress bars here or in our workers


# -- the jobs -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Job:
    """One job: its config type and run function ("module:name", imported when used, so that
    `--help` loads no model code), the summary keys it prints, and its usage text."""

    config: str
    run: str
    brief: tuple[str, ...]
    usage: str

    @staticmethod
    def _load(reference: str) -> Any:
        module, name = reference.split(":")
        return getattr(importlib.import_module(module), name)

    def parse_config(self, name: str, argv: Sequence[str] | None,
                     prog: str | None = None) -> tuple[Any, bool]:
        return parse(self._load(self.config), argv, description=self.usage,
                     prog=prog or f"jobs/{name}.py")

    @property
    def summary(self) -> str:
        """The usage's first sentence (to its first `: ` or `. `): what `sentray --help` lists."""
        paragraph = " ".join(self.usage.split("\n\n", 1)[0].split())
        return re.split(r"[:.](?:\s|$)", paragraph, maxsplit=1)[0]

    def main(self, name: str, argv: Sequence[str] | None = None, prog: str | None = None) -> Any:
        """Parse, set up logging, run; returns the job's result. Bad input, and storage that
        failed under the job, raise `CommandError` (its line and status: `command_error`); any
        other failure propagates as itself (`command` ends it the same way)."""
        config, verbose = self.parse_config(name, argv, prog)
        setup_logging(verbose)
        logging.getLogger(f"sentray.{name}").debug("config: %s", config)
        from sentray.kit.storage import StorageError

        try:
            result = self._load(self.run)(config)
        except (*BAD_INPUT, StorageError) as exc:
            raise command_error(exc) from exc
        if self.brief:
            print(json.dumps({key: result[key] for key in self.brief}), flush=True)
        return result


JOBS: dict[str, Job] = {
    "embed": Job(
        "sentray.bulk_embedding.config:EmbedConfig", "sentray.bulk_embedding.job:run_embedding",
        ("sources", "rows_in", "rows_out", "status", "rows_not_encoded", "seconds"),
        f"""Embed a corpus with a sentence encoder on Ray Data and write Parquet.

    python jobs/embed.py                                   # bundled sample, packaged model, local Ray
    python jobs/embed.py --input s3://bucket/corpus/ --output s3://bucket/emb/ \\
        --model bert-base-uncased --pooling ditto --actors 8 --num-gpus 1 --precision fp16

Input: text files (one sentence per line) or Parquet, a file or a folder, local or s3://.
Output: OUTPUT/<file key>/part-*.parquet with id, embedding, status, source, row; and
OUTPUT/{OutputFolder.SUMMARY}. Every input row is in the output exactly once; rerunning into
the same output skips the input files already done."""),
    "augment": Job(
        "sentray.sifter.config:AugmentConfig", "sentray.sifter.job:run_augmentation",
        ("sources", "rows_in", "rows_out", "rows_rejected", "rejected_by_reason",
         "backbone_source", "sentences_per_second", "seconds"),
        f"""SIFTER augmentation on Ray Data: for every sentence X, Y (X + its backbone) and Z (X without
articles, conjunctions and pronouns), with the paper's corpus filter.

    python jobs/augment.py                                  # bundled sample, local Ray
    python jobs/augment.py --input corpus.txt --output out/aug --actors 2
    ray job submit --address http://127.0.0.1:8265 --working-dir . -- \\
        python jobs/augment.py --input s3://bucket/corpus/ --output s3://bucket/aug/

Output: OUTPUT/<file key>/part-*.parquet with id, text (X), backbone_text (Y), pruned_text (Z),
subject, relation, object, backbone_source (openie | dependency | none), source, row; rejected
rows with their reject_reason in REJECTS (default OUTPUT-rejects); OUTPUT/{OutputFolder.SUMMARY}.
Every input row is in exactly one of the two."""),
    "train": Job(
        "sentray.contrastive.config:TrainConfig", "sentray.contrastive.job:run_training",
        ("rows", "steps", "initial_stsb_dev", "best_step", "best_stsb_dev", "exported",
         "seconds"),
        """SIFTER-SimCSE (or unsupervised SimCSE) on Ray Train: DDP over --workers, STS-B dev every
--eval-steps, the best checkpoint exported for jobs/embed.py and jobs/evaluate.py.

    python jobs/augment.py                       # X/Y/Z of the bundled sample -> out/augmented
    python jobs/train.py --objective sifter      # -> out/train/best, out/train/best-st
    python jobs/evaluate.py --model out/train/best
    ray job submit --address http://HEAD:8265 --working-dir . -- python jobs/train.py \\
        --input s3://bucket/aug/ --output s3://bucket/runs/ --model bert-base-uncased \\
        --workers 2 --use-gpu --precision fp16

Rerunning with the same --output and --name resumes the run from its latest checkpoint; a lost
worker restarts the group from there too (up to --max-failures times)."""),
    "train_lstm": Job(
        "sentray.lstm.config:LSTMConfig", "sentray.lstm.job:run_lstm",
        ("cell", "seed", "dev_accuracy", "test_accuracy", "best_step", "steps", "seconds"),
        """SIFTER-LSTM or the LSTM baseline on SST-2: WordPiece embeddings from a pretrained encoder, one
LSTM layer, dev accuracy every --eval-steps, the best step (by dev) scored on test. Writes
OUTPUT/metrics.json (dev_accuracy, test_accuracy, best_step, history, ...).

    python jobs/train_lstm.py --cell sifter --data-dir ../shared/data --output out/lstm/sifter-1
    python jobs/train_lstm.py --cell lstm --data-dir ../shared/data --output out/lstm/lstm-1
    python jobs/train_lstm.py --cell sifter --workers 2          # Ray Train, 2 CPU workers (DDP)

SIFTER forces the input gate to 1 on sentiment words: VADER lexicon entries with |valence| >=
--lexicon-threshold whose tokenization is a single word piece (see sentray/lstm/lexicon.py)."""),
    "index": Job(
        "sentray.index.config:IndexConfig", "sentray.index.job:run_index",
        ("table", "rows_added", "rows_without_vector", "rows", "index", "seconds"),
        f"""Index an embedding output: a LanceDB table of its rows with an ANN index, for `sentray search`.

    python jobs/index.py out/embeddings              # -> out/embeddings/{OutputFolder.INDEX_TABLE}
    python jobs/index.py out/embeddings --text-from corpus.txt --index-uri s3://bucket/t.lance

Every row with a vector goes into the table once (rows without one are counted, left out);
rerun after the embedding job added input files and only their rows are added; a killed run is
rolled back to its last recorded commit and redone. A table of another embedding is refused."""),
    "search": Job(
        "sentray.index.config:SearchConfig", "sentray.index.search:run_search", (),
        f"""Search an index for the rows nearest to queries embedded as its rows were: by the model,
pooling, Ditto head, --truncate-dim, precision and normalization the table records.

    python jobs/search.py out/embeddings --query "a dog in the park" -k 5
    python jobs/search.py out/embeddings/{OutputFolder.INDEX_TABLE} --queries questions.txt --json"""),
    "serve": Job(
        "sentray.serve.config:ServeConfig", "sentray.serve.job:run_serve", (),
        """Serve an index on Ray Serve: an HTTP JSON API and a search page, until Ctrl-C.

    python jobs/serve.py out/embeddings                     # http://127.0.0.1:8000
    curl -s 127.0.0.1:8000/search -d '{"query": "a dog in the park", "k": 5}'
    python jobs/serve.py s3://bucket/emb --replicas 1-4 --token "$SECRET" --port 8080

POST /search takes {"query": TEXT, "k": N} or {"queries": [TEXT, ...], "k": N} and answers with
the hits (id, score, text, source, row); GET /info says what the table holds, GET /healthz
that the service is up, GET / is the search page. A bad request gets a 400 with its reason, an
overload a 503. The queries are embedded as the table's rows were (`sentray search`'s encoder).
Loopback only unless --host names another address. Prints one JSON line (its URL) once it
answers."""),
    "evaluate": Job(
        "sentray.evaluation.config:EvaluateConfig", "sentray.evaluation.job:run_evaluation",
        (),
        """Score an encoder on the 7 STS tasks (SentEval protocol), optionally choosing the Ditto head.

    python jobs/evaluate.py --model all-MiniLM-L6-v2 --pooling mean --data-dir ../shared/data
    python jobs/evaluate.py --pooling ditto --search-head --data-dir ../shared/data
    python jobs/evaluate.py --max-pairs 200 ...   # a quick check: each task's first 200 pairs"""),
}


def job_entry_points(name: str) -> tuple[Callable, Callable]:
    """(parse_config, main) of job `name`, for jobs/<name>.py: `main(argv)` returns the job's
    result (for Python callers); the script itself runs `command(name)`."""
    job = JOBS[name]
    return (lambda argv=None: job.parse_config(name, argv),
            lambda argv=None: job.main(name, argv))


def command(name: str, argv: Sequence[str] | None = None, prog: str | None = None) -> int:
    """Job `name` run as a command: its exit status (the module docstring), with one `error: ...`
    line on stderr when it did not succeed (tyro's flag errors print theirs in `parse`)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        JOBS[name].main(name, argv, prog)
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr)
        return INTERRUPTED_STATUS
    except (CommandError, Exception) as exc:  # noqa: BLE001 (one line, not a traceback)
        if "-v" in argv or "--verbose" in argv:
            traceback.print_exc()
        error = command_error(exc)
        print(error.code, file=sys.stderr)
        return error.status
    return 0


def usage() -> str:
    lines = [f"  {name:<11} {job.summary}" for name, job in JOBS.items()]
    return ("usage: sentray <job> [flags]   (sentray <job> --help lists the job's flags)\n\n"
            "jobs:\n" + "\n".join(lines))


def main(argv: Sequence[str] | None = None) -> int:
    """The `sentray` console script: `sentray <job> [flags]`, `sentray <job> --help`; no job or
    an unknown one is bad input (exit status 2)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] in ("-h", "--help"):
        print(usage())
        return 0
    if not argv or argv[0] not in JOBS:
        print(usage(), file=sys.stderr)
        said = f"unknown job {argv[0]!r}" if argv else "no job given"
        print(f"error: {said}; the jobs are {', '.join(JOBS)}", file=sys.stderr)
        return BAD_INPUT_STATUS
    return command(argv[0], argv[1:], prog=f"sentray {argv[0]}")
