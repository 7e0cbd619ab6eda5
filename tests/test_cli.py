"""Every job's flags come from its config dataclass; --config FILE.yaml and OUTPUT/_config.yaml."""

from __future__ import annotations

import pytest
from conftest import load_job

from sentray.contrastive.objectives import SifterWeights
from sentray.kit import config_files

JOBS = ("embed", "augment", "train", "train_lstm", "evaluate")


def config_type(job):
    return type(job.parse_config([])[0])


@pytest.mark.parametrize("name", JOBS)
def test_help_lists_every_config_field(name, capsys):
    job = load_job(name)
    with pytest.raises(SystemExit) as info:
        job.parse_config(["--help"])
    assert info.value.code == 0
    shown = capsys.readouterr().out
    fields = config_files.flat_fields(config_type(job))
    assert len(fields) >= 7
    for field in [*fields, "config", "verbose"]:
        assert "--" + field.replace("_", "-") in shown, field
    for internal in ("rows_per_block", "with_previous_text"):  # set by the job, not the user
        assert "--" + internal.replace("_", "-") not in shown


@pytest.mark.parametrize("name", JOBS)
def test_the_written_config_repeats_the_run(name, tmp_path):
    """A job's effective config, written as _config.yaml and read back with --config, is the
    same config; flags given with --config override the file."""
    job = load_job(name)
    flags = {"embed": ["--batch-size", "16", "--pooling", "ditto", "--head", "1-2", "--actors", "3"],
             "augment": ["--keep-short", "--triple", "longest", "--rows-per-batch", "64"],
             "train": ["--lambdas", "1,0,0", "--mlp", "--max-grad-norm", "0", "--lr", "3e-5"],
             "train_lstm": ["--cell", "lstm", "--max-steps", "7", "--use-gpu"],
             "evaluate": ["--tasks", "STSB,SICKR", "--max-pairs", "50", "--pooling", "cls"]}[name]
    config, _ = job.parse_config(flags)
    written = tmp_path / "_config.yaml"
    assert config_files.write_config(config, str(tmp_path), job=name) == str(written)
    assert f"#   python jobs/{name}.py --config {written}\n" in written.read_text()
    again, _ = job.parse_config(["--config", str(written)])
    assert again == config
    flag = "seed" if "seed" in config_files.flat_fields(type(config)) else "batch_size"
    changed, _ = job.parse_config(["--config", str(written), "--" + flag.replace("_", "-"), "5"])
    assert config_files.flat_values(changed) == {**config_files.flat_values(config), flag: 5}


def test_config_file_keys_are_the_flags_and_flags_win(tmp_path):
    job = load_job("train")
    path = tmp_path / "run.yaml"
    path.write_text("batch_size: 16\nlambdas: [1, 0, 1]\nuse-gpu: false\nmlp: false\n"
                    "pooling: cls_before_pooler\nname: null\nlr: 3.0e-5\n")
    config, verbose = job.parse_config(["--config", str(path), "--batch-size", "32", "-v"])
    assert (config.batch_size, config.lambdas, config.cluster.use_gpu, config.mlp, config.lr) == (
        32, SifterWeights(1, 0, 1), False, False, 3e-5)
    assert config.name == "sifter" and verbose is True
    file_only, _ = job.parse_config([f"--config={path}"])
    assert file_only.batch_size == 16


@pytest.mark.parametrize(("text", "message"), [
    ("batchsize: 16\n", "unknown option 'batchsize'; the options are"),
    ("- 16\n", "must hold `key: value` lines"),
    ("use_gpu: 1\n", "use_gpu must be true or false"),
    ("batch_size: [\n", "is not YAML"),
])
def test_bad_config_files_name_the_problem(tmp_path, text, message):
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(SystemExit, match=message.replace("[", r"\[")):
        load_job("train").parse_config(["--config", str(path)])
    with pytest.raises(SystemExit, match="missing.yaml"):
        load_job("train").parse_config(["--config", str(tmp_path / "missing.yaml")])


def test_a_nested_default_does_not_fix_the_models_pooling(tmp_path, tiny_model_dir):
    """The encoder's pooling follows the model chosen on the command line (a sentray export's
    sentray.json), not the default model's: the command line keeps what was typed, the plan
    decides."""
    import json
    import shutil

    model = tmp_path / "exported"
    shutil.copytree(tiny_model_dir, model)
    (model / "sentray.json").write_text(json.dumps({"pooling": "cls_before_pooler"}))
    from sentray.encode.plan import model_plan

    def pooling(job: str, *flags: str) -> str:
        config = load_job(job).parse_config(list(flags))[0]
        assert config.encoder.pooling is None  # as typed
        return model_plan(config.encoder).pooling

    assert pooling("embed") == "last_avg"  # all-MiniLM-L6-v2's mean
    assert pooling("embed", "--model", str(model)) == "cls_before_pooler"
    assert pooling("evaluate", "--model", str(model)) == "cls_before_pooler"


@pytest.mark.parametrize("name", JOBS)
def test_every_job_writes_with_output(name):
    assert "output" in config_files.flat_fields(config_type(load_job(name)))


@pytest.mark.parametrize("name", ["evaluate", "train_lstm"])
def test_the_old_out_flag_is_accepted_with_a_notice(name, tmp_path, capsys):
    """`--out` (evaluate and train_lstm before issue 44) is `--output`, with one line saying so;
    an old _config.yaml's `out:` key too."""
    job = load_job(name)
    for flags in (["--out", str(tmp_path / "a")], [f"--out={tmp_path / 'a'}"]):
        config, _ = job.parse_config(flags)
        assert config.output == str(tmp_path / "a")
        assert capsys.readouterr().err.strip() == "warning: --out is deprecated; use --output"
    old = tmp_path / "old.yaml"
    old.write_text(f"out: {tmp_path / 'b'}\n")
    config, _ = job.parse_config(["--config", str(old)])
    assert config.output == str(tmp_path / "b")
    assert "out is deprecated; use output" in capsys.readouterr().err


@pytest.mark.parametrize(("name", "old"), [("search", "index"), ("serve", "output")])
def test_index_search_and_serve_name_their_embedding_output_alike(name, old, tmp_path, capsys):
    """The embedding output folder index, search and serve read is `embeddings` in all three
    (issue 66); a config file's old key (search's `index:`, serve's `output:`) still works, with
    one line saying so."""
    job = load_job(name)
    assert "embeddings" in config_files.flat_fields(config_type(job))
    config, _ = job.parse_config([str(tmp_path / "emb")])
    assert config.embeddings == str(tmp_path / "emb")
    path = tmp_path / "old.yaml"
    path.write_text(f"{old}: {tmp_path / 'b'}\n")
    config, _ = job.parse_config(["--config", str(path)])
    assert config.embeddings == str(tmp_path / "b")
    assert capsys.readouterr().err.strip() == (f"warning: --config {path}: {old} is "
                                               "deprecated; use embeddings")


def test_help_reads_right(capsys, monkeypatch):
    """One default per flag (a help that says its own, "default: the bundled ... sample", gets
    no "(default: None)" after it); `sentray --help` lists each job's whole first sentence;
    index's --ray-rows says what it does, not --write's text."""
    import re

    from sentray.cli import JOBS, main

    monkeypatch.setenv("COLUMNS", "80")  # one column of flags
    for name in JOBS:
        with pytest.raises(SystemExit):
            load_job(name).parse_config(["--help"])
        text = " ".join(capsys.readouterr().out.replace("│", " ").split())
        twice = re.search(r"default:(?:(?!--)[^()])*\)?\s*\(default:", text)  # in one flag
        assert twice is None, (name, twice and text[twice.start() - 80:twice.end()])
    assert main(["--help"]) == 0
    listed = capsys.readouterr().out
    search = next(line for line in listed.splitlines() if line.startswith("  search "))
    assert search.endswith("queries embedded as its rows were"), search
    assert all(line.count("(") == line.count(")") for line in listed.splitlines())
    with pytest.raises(SystemExit):
        load_job("index").parse_config(["--help"])
    shown = {line.split()[0]: line for line in capsys.readouterr().out.splitlines()
             if line.strip().startswith("--")}
    assert "--write auto" in shown["--ray-rows"] and "local:" not in shown["--ray-rows"]


def test_a_job_process_ends_with_its_status_its_output_flushed_and_exit_handlers_run():
    """`exit_process` (what jobs/*.py end with) skips the interpreter's teardown, not the exit
    handlers (Ray's shutdown) nor what was printed."""
    import subprocess
    import sys

    ended = subprocess.run(
        [sys.executable, "-c", "import atexit, sys; "
         "from sentray.kit.exit_status import exit_process; atexit.register(lambda: print('handler ran')); print('the result', end=''); "
         "print('a warning', file=sys.stderr, end=''); exit_process(3)"],
        capture_output=True, text=True, timeout=60)
    assert ended.returncode == 3
    assert ended.stdout == "the resulthandler ran\n" and ended.stderr == "a warning"
