"""The trainer's bf16 check on a CPU: fp32 against bf16 autocast timed on a fake clock that runs
slower under autocast (an emulating CPU) or faster (a native one): the ratio is measured, the
slower case warned about with its figure, the faster one logged."""

from __future__ import annotations

import logging

import torch

from sentray.training import autocast_check


class AutocastClock:
    """A clock whose step costs `bf16` seconds under CPU autocast and 1 s without."""

    def __init__(self, bf16: float) -> None:
        self.now, self.bf16 = 0.0, bf16

    def __call__(self) -> float:
        return self.now

    def step(self) -> None:
        self.now += self.bf16 if torch.is_autocast_enabled("cpu") else 1.0


def test_the_ratio_is_measured_and_a_slower_bf16_is_warned_about(monkeypatch, caplog):
    for bf16_seconds, expected in ((4.0, 0.25), (0.5, 2.0)):
        clock = AutocastClock(bf16_seconds)
        assert autocast_check.autocast_speedup(clock.step, clock=clock) == expected
    monkeypatch.setattr(autocast_check, "autocast_speedup", lambda step: 0.65)  # issue 42's Xeon
    with caplog.at_level(logging.INFO, logger="sentray.training.autocast_check"):
        assert autocast_check.check_cpu_bf16(lambda: None, "Intel Xeon") == 0.65
    assert "0.65x the speed of fp32" in caplog.text and "Use --precision fp32" in caplog.text
    assert caplog.records[-1].levelno == logging.WARNING


def test_a_real_forward_backward_is_timed_both_ways():
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1))
    batch = torch.randn(4, 8)

    def step() -> None:
        model(batch).float().sum().backward()
        model.zero_grad(set_to_none=True)

    assert autocast_check.autocast_speedup(step, repeats=1) > 0
