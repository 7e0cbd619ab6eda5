"""`sentray serve`'s flags: every one in --help, bad values named before anything starts, the
token from the environment."""

from __future__ import annotations

import pytest
from conftest import load_job

from sentray.kit import config_files
from sentray.serve.config import ServeConfig


def test_help_lists_every_flag(capsys):
    with pytest.raises(SystemExit) as info:
        load_job("serve").parse_config(["--help"])
    assert info.value.code == 0
    shown = capsys.readouterr().out
    for field in config_files.flat_fields(ServeConfig):
        if field != "embeddings":  # the positional EMBEDDINGS
            assert "--" + field.replace("_", "-") in shown, field
    assert "127.0.0.1" in shown and "MIN-MAX" in shown


@pytest.mark.parametrize(("flags", "message"), [
    (["--replicas", "3-1"], "--replicas must be N or MIN-MAX"),
    (["--replicas", "0"], "--replicas must be N or MIN-MAX"),
    (["--port", "0"], "port must be 1-65535"),
    (["--token", " "], "--token is empty"),
    (["--index-uri", "t"], "--index-uri must end with .lance"),
    (["--max-k", "0"], "max_k must be >= 1"),
    (["--request-timeout-s", "0"], "request_timeout_s and cpus_per_replica must be > 0"),
    (["--search-mode", "ram"], "--search-mode"),
    (["--direct-port", "8000"], "--direct-port must be 1-65535 and not --port (8000)"),
    (["--direct-port", "70000"], "--direct-port must be 1-65535"),
    (["--direct-port", "8001", "--replicas", "1-2"], "it needs --replicas 1, got 1-2"),
    (["--direct-port", "8001", "--address", "10.0.0.5:6379"],
     "--direct-port needs the local cluster this job starts"),
])
def test_bad_flags_are_named(flags, message, exit_message):
    with pytest.raises(SystemExit) as info:
        load_job("serve").parse_config(["out", *flags])
    assert message in exit_message(info)


def test_the_token_and_the_replicas(monkeypatch):
    config, _ = load_job("serve").parse_config(["out", "--replicas", "1-3"])
    assert (config.replicas.minimum, config.replicas.maximum) == (1, 3)
    assert config.host == "127.0.0.1" and config.secret is None and config.table == "out"
    monkeypatch.setenv("SENTRAY_SERVE_TOKEN", "from-env")
    assert config.secret == "from-env"
    given, _ = load_job("serve").parse_config(["out", "--token", "flag"])
    assert given.secret == "flag"
