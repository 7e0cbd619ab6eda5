"""Every command line the documentation shows (README.md and docs/, code blocks of any kind)
parses with its program's own parser: a job's with the job's parser (its flags exist, its values
pass the config's checks), a script's flags exist in the script; every `--flag` written anywhere
in the pages, prose included, is a flag of something; and the short ones run: every `--help`,
the 20-row embed of docs/getting-started.md, and its index and search in
docs/index-and-search.md."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from sentray.cli import JOBS

ROOT = Path(__file__).resolve().parents[2]
# the pages: README.md and every page of the site
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
RUN_MARK = "<!-- run by tests/docs/test_docs_commands.py -->"
FENCE = re.compile(r"^```[^\n]*\n(.*?)^```", re.M | re.S)
FLAG = re.compile(r"(?<![\w-])--[a-z][a-z0-9_.-]*[a-z0-9]")
# flags of other programs that the pages write: Ray's CLI, pytest, venv, mkdocs; and the
# spellings other flag parsers would give ours (getting-started.md compares them)
OTHER_PROGRAMS = {
    "--address", "--working-dir", "--head", "--dashboard-host", "--node-ip-address",
    "--num-cpus", "--runtime-env-json", "--autoscaling-config", "--temp-dir", "--force",
    "--hypothesis-seed", "--durations", "--collect-only", "--system-site-packages", "--strict",
    "--batch_size", "--encoder.batch_size",
}


@dataclass(frozen=True)
class Command:
    page: Path
    block: str  # the whole code block, for its loop variables and config files
    words: list[str]

    def __str__(self) -> str:
        return f"{self.page.relative_to(ROOT)}: {' '.join(self.words)}"


def blocks(page: Path) -> Iterator[tuple[str, bool]]:
    """(code block, whether the page marks it to be run) for every fenced block of `page`."""
    text = page.read_text()
    for match in FENCE.finditer(text):
        yield match.group(1), text[:match.start()].rstrip().endswith(RUN_MARK)


def command_lines(block: str) -> Iterator[tuple[str, list[str]]]:
    """The block's shell command lines, each with its words: continuations joined, comments dropped,
    `VAR=value` prefixes dropped, loop variables given their first value, `...` (more flags
    elided) dropped; `ray job submit ... -- CMD` is CMD."""
    loops = dict(re.findall(r"\bfor (\w+) in (\S+)", block))
    for line in block.replace("\\\n", " ").splitlines():
        for name, value in loops.items():
            line = line.replace(f"${name}", value)
        try:
            words = shlex.split(line, comments=True)
        except ValueError:  # not shell (Python, YAML)
            continue
        if "--" in words:
            words = words[words.index("--") + 1:]
        while words and re.fullmatch(r"\w+=\S*", words[0]):
            words = words[1:]
        yield line, [word for word in words if word != "..."]


def job_of(words: list[str]) -> tuple[str, list[str]] | None:
    """(job name, its argv) when `words` runs a job: python jobs/X.py ... or sentray X ..."""
    if len(words) >= 2 and words[0] == "python" and re.fullmatch(r"jobs/\w+\.py", words[1]):
        return words[1][5:-3], words[2:]
    if len(words) >= 2 and words[0] == "sentray" and words[1] in JOBS:
        return words[1], words[2:]
    return None


def script_of(words: list[str]) -> Path | None:
    """The repository script `words` runs (python bench/x.py, bash x.sh, docs/x/y.sh, python -m
    bench.x: its __main__.py), if any."""
    if words[:2] == ["python", "-m"] and len(words) > 2:
        module = ROOT.joinpath(*words[2].split("."))
        for path in (module / "__main__.py", module.with_suffix(".py")):
            if path.is_file():
                return path
    for word in words[:2]:
        if re.search(r"\.(py|sh)$", word) and (ROOT / word).is_file():
            if not word.startswith("jobs/"):
                return ROOT / word
    return None


def commands() -> list[Command]:
    found = []
    for page in PAGES:
        for block, _ in blocks(page):
            found += [Command(page, block, words) for _, words in command_lines(block) if words]
    return found


def job_flags() -> set[str]:
    """Every flag of every job, `--no-X` of the switches included."""
    from sentray.kit.config_files import flat_fields

    flags = {"--config", "--verbose", "--help"}
    for job in JOBS.values():
        for name, hint in flat_fields(job._load(job.config)).items():
            flag = "--" + name.replace("_", "-")
            flags.add(flag)
            if hint is bool or hint == bool | None:
                flags.add("--no-" + flag[2:])
    return flags


def config_file(command: Command, path: str, job: str, folder: Path) -> Path:
    """The file a `--config PATH` of the docs stands for: a YAML block of the same page whose
    first line is `# PATH`, or (a run's own `.../_config.yaml`) what the job writes there."""
    from sentray.kit.config_files import config_yaml

    target = folder / Path(path).name
    for block, _ in blocks(command.page):
        if block.startswith(f"# {path}\n"):
            target.write_text(block)
            return target
    assert path.endswith("_config.yaml"), f"{command}: no YAML block `# {path}` on the page"
    config_type = JOBS[job]._load(JOBS[job].config)
    target.write_text(config_yaml(config_type(), f"python jobs/{job}.py"))
    return target


def parse_job(command: Command, tmp_path: Path, monkeypatch) -> None:
    """Parse `command` with its job's parser, the model-dependent resolution left out (the
    pages name models this machine may not hold: bert-base-uncased, out/train/best)."""
    job, argv = job_of(command.words)
    assert job in JOBS, f"{command}: no job {job!r}"
    config_type = JOBS[job]._load(JOBS[job].config)
    monkeypatch.setattr(config_type, "resolved", lambda self: self, raising=False)
    argv = list(argv)
    if "--config" in argv:
        at = argv.index("--config") + 1
        argv[at] = str(config_file(command, argv[at], job, tmp_path))
    JOBS[job].parse_config(job, argv)


# -- the tests ------------------------------------------------------------------------------------


def test_the_pages_show_job_commands():
    """The scan finds what the pages hold (a scan that found nothing would pass vacuously)."""
    jobs = {job_of(c.words)[0] for c in commands() if job_of(c.words)}
    assert jobs == set(JOBS)


def test_every_job_command_in_the_docs_parses(tmp_path, monkeypatch, capsys):
    failed = []
    for command in commands():
        if job_of(command.words) is None or "--help" in command.words:
            continue
        with monkeypatch.context() as patch:
            try:
                parse_job(command, tmp_path, patch)
            except SystemExit as exc:
                message = " ".join(capsys.readouterr().err.split()[-12:])
                failed.append(f"{command}\n    {exc.code} {message}")
    assert not failed, "\n".join(failed)


def test_every_script_command_in_the_docs_names_flags_the_script_has():
    failed = []
    for command in commands():
        script = script_of(command.words)
        if script is None:
            continue
        source = script.read_text()
        for flag in FLAG.findall(" ".join(command.words)):
            if flag not in source:
                failed.append(f"{command}: {flag} is not in {script.relative_to(ROOT)}")
    assert not failed, "\n".join(failed)


def test_every_flag_the_pages_write_exists():
    """Prose included: a flag renamed in a config fails here until every page says the new one."""
    from sentray.kit.config_files import RENAMED

    # a renamed flag still works (with a deprecation line), and a page may say what it was
    known = job_flags() | OTHER_PROGRAMS | {f"--{old.replace('_', '-')}" for old in RENAMED}
    for folder in ("bench", "experiments"):
        for script in (ROOT / folder).rglob("*"):
            if script.suffix in (".py", ".sh"):
                known |= set(FLAG.findall(script.read_text()))
    unknown = [f"{page.relative_to(ROOT)}: {flag}" for page in PAGES
               for flag in sorted(set(FLAG.findall(page.read_text())) - known)]
    assert not unknown, "\n".join(unknown)


def test_every_help_shown_runs(capsys):
    from sentray import cli

    shown = {tuple(c.words) for c in commands() if c.words[-1:] == ["--help"]}
    assert shown, "the pages show no --help"
    for words in shown:
        job = job_of(list(words))
        if job is not None:
            with pytest.raises(SystemExit) as exit_info:
                JOBS[job[0]].parse_config(job[0], job[1])
            assert exit_info.value.code == 0, words
        else:
            assert words == ("sentray", "--help"), words
            assert cli.main(["--help"]) == 0  # the console script's exit status
        assert "usage" in capsys.readouterr().out, words


@pytest.mark.ray
def test_the_marked_commands_run(ray_cluster, tmp_path, monkeypatch):
    """The blocks a page marks to be run (the 20-row embed, its index and search), line by line in a scratch folder
    that sees the repository's sentray/data: shell lines through bash, job lines in-process
    on the session's cluster."""
    marked = [(page, block) for page in PAGES for block, run in blocks(page) if run]
    assert marked, "no page marks a block to be run"
    (tmp_path / "sentray").symlink_to(ROOT / "sentray")
    monkeypatch.chdir(tmp_path)
    outputs = []
    for page, block in marked:
        for line, words in command_lines(block):
            if not words:
                continue
            job = job_of(words)
            if job is None:
                subprocess.run(["bash", "-c", line], check=True)
                continue
            assert job[0] in ("embed", "index", "search"), \
                f"{page}: only embed, index and search runs are cheap enough here"
            JOBS[job[0]].main(job[0], job[1])
            if job[0] == "embed":
                outputs.append(Path(job[1][job[1].index("--output") + 1]))
    assert outputs
    for output in outputs:
        summary = json.loads((tmp_path / output / "_summary.json").read_text())
        assert summary["rows_in"] == summary["rows_out"] == 20
