"""Nothing leaves the machine: the embed job on its Ray path, and an OpenVINO encoder built in a
process of its own, both run under strace's `connect` trace with `CI` unset (OpenVINO's and
NNCF's telemetry is off under CI=true only, which is why a suite run by CI never saw it), and
no process of theirs connects to an address but loopback (a Unix socket is local too).

Before sentray turned OpenVINO's telemetry off (`sentray.encode.runtimes.openvino_runtime`), this job's actor
looked the telemetry host up: a connect() to the machine's DNS resolver, port 53."""

from __future__ import annotations

import ipaddress
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# connect(5, {sa_family=AF_INET, sin_port=htons(53), sin_addr=inet_addr("10.0.0.53")}, 16)
# connect(5, {sa_family=AF_INET6, ..., inet_pton(AF_INET6, "::ffff:127.0.0.1", &sin6_addr), ...
ADDRESS = re.compile(r'sa_family=AF_INET6?,.*?(?:inet_addr\("([^"]+)"\)|inet_pton\(AF_INET6, '
                     r'"([^"]+)")')


def traced(command: list[str], trace: Path, env: dict) -> subprocess.CompletedProcess:
    """`command` run under strace, every process it starts followed, connect() calls only
    (filtered in the kernel: the processes run at their own speed)."""
    return subprocess.run(["strace", "-f", "--seccomp-bpf", "-e", "trace=connect", "-o",
                           str(trace), *command], env=env, capture_output=True, text=True,
                          timeout=300)


def off_loopback(trace: Path) -> list[str]:
    """The connect() lines of `trace` to an IPv4 or IPv6 address that is not loopback."""
    found = []
    for line in trace.read_text().splitlines():
        match = ADDRESS.search(line)
        if match is None:
            continue
        address = ipaddress.ip_address(match.group(1) or match.group(2))
        if address.version == 6 and address.ipv4_mapped is not None:
            address = address.ipv4_mapped
        if not address.is_loopback:
            found.append(line)
    return found


def test_off_loopback_finds_a_resolver_connect(tmp_path):
    trace = tmp_path / "trace.txt"
    trace.write_text(
        '7 connect(4, {sa_family=AF_UNIX, sun_path="/var/run/nscd/socket"}, 110) = -1\n'
        '7 connect(5, {sa_family=AF_INET, sin_port=htons(6379), sin_addr=inet_addr('
        '"127.0.0.1")}, 16) = 0\n'
        '7 connect(5, {sa_family=AF_INET6, sin6_port=htons(1), sin6_flowinfo=htonl(0), '
        'inet_pton(AF_INET6, "::ffff:127.0.0.1", &sin6_addr), sin6_scope_id=0}, 28) = 0\n'
        '8 connect(42, {sa_family=AF_INET, sin_port=htons(53), sin_addr=inet_addr('
        '"10.255.255.53")}, 16) = 0\n')
    assert off_loopback(trace) == [trace.read_text().splitlines()[-1]]


@pytest.mark.ray
@pytest.mark.skipif(shutil.which("strace") is None, reason="needs strace (Debian: strace; "
                    ".ci/run installs it)")
def test_the_ray_path_and_an_openvino_encoder_connect_to_loopback_only(tiny_model_dir,
                                                                       tmp_path):
    pytest.importorskip("openvino")
    corpus = tmp_path / "small.txt"
    corpus.write_text("".join(f"Sentence {i} of a small corpus.\n" for i in range(24)))
    # CI unset (the telemetry's own off switch); no RAY_ADDRESS: the job starts its own
    # cluster, whose every process is traced too
    env = {k: v for k, v in os.environ.items() if k not in ("CI", "RAY_ADDRESS")}
    job_trace, encoder_trace = tmp_path / "job.trace", tmp_path / "encoder.trace"
    job = traced([sys.executable, str(ROOT / "jobs" / "embed.py"), "--input", str(corpus),
                  "--output", str(tmp_path / "out"), "--model", str(tiny_model_dir),
                  "--pooling", "mean", "--runtime", "openvino", "--actors", "1",
                  "--in-process-rows", "0"], job_trace, env)  # Ray, however small the input
    assert job.returncode == 0, job.stderr[-3000:]
    settings = json.loads((tmp_path / "out" / "_settings.json").read_text())
    assert settings["settings"]["runtime"] == "openvino", settings  # its actors ran OpenVINO
    build = ("from sentray.encode.config import EncoderConfig\n"
             "from sentray.encode.encoder import SentenceEncoder\n"
             "from sentray.precision.plan import plan_encoder\n"
             f"config = EncoderConfig(model={str(tiny_model_dir)!r}, pooling='mean', "
             "runtime='openvino')\n"
             "encoder = SentenceEncoder(plan_encoder(config))\n"
             "assert encoder.plan.runtime == 'openvino', encoder.plan\n"
             "print(encoder.encode(['one sentence', 'and another']).shape)\n")
    encoder = traced([sys.executable, "-c", build], encoder_trace, env)
    assert encoder.returncode == 0, encoder.stderr[-3000:]
    assert off_loopback(job_trace) == [], "the job connected off loopback"
    assert off_loopback(encoder_trace) == [], "the OpenVINO encoder connected off loopback"
    assert "sa_family=AF_INET" in job_trace.read_text()  # the trace saw Ray's own connects
