"""SIFTER-LSTM's cell (the SIFTER paper, section "SIFTER-LSTM"); the classifier both cells sit in
is `sentray.lstm.classifier`, trained and tested on SST-2 by `sentray.lstm.job`.

SIFTER-LSTM is a standard LSTM whose input gate is short-circuited to an all-one vector when the
input word belongs to a task-relevant set (here: sentiment words, `sentray.lstm.lexicon`):

    i_t = 1                                                if x_t is in the set (SIFTER)
    i_t = sigmoid(W_ii x_t + b_ii + W_hi h_{t-1} + b_hi)   otherwise
    f_t, g_t, o_t as in any LSTM;  c_t = f_t * c_{t-1} + i_t * g_t;  h_t = o_t * tanh(c_t)

Batches are right-padded; padded steps leave h and c unchanged (and output zeros, as
`pad_packed_sequence` does), so the result does not depend on the padding.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import torch
from torch import nn


def lstm_cell_step(
    gates_x: torch.Tensor,
    h: torch.Tensor,
    c: torch.Tensor,
    weight_hh: torch.Tensor,
    force_input: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """One LSTM step, gates in torch.nn.LSTM's order (i, f, g, o), with the SIFTER input gate.

    gates_x: (B, 4H) x_t W_ih^T + b_ih + b_hh (computed for the whole sequence at once);
    h, c: (B, H) the previous state; weight_hh: (4H, H); force_input: (B,) bool, True where
    x_t is in the SIFTER set (i_t = 1 there), or None for a plain LSTM. Returns (h_t, c_t).
    """
    gates = torch.addmm(gates_x, h, weight_hh.t())  # (B, 4H): all four gates in one product
    i, f, g, o = gates.chunk(4, dim=1)  # each (B, H)
    i = torch.sigmoid(i)
    if force_input is not None:
        i = torch.where(force_input[:, None], 1.0, i)  # the short circuit: no gradient there
    c = torch.sigmoid(f) * c + i * torch.tanh(g)  # (B, H)
    h = torch.sigmoid(o) * torch.tanh(c)  # (B, H)
    return h, c


def sifter_lstm(
    x: torch.Tensor,
    weight_ih: torch.Tensor,
    weight_hh: torch.Tensor,
    bias_ih: torch.Tensor,
    bias_hh: torch.Tensor,
    force_input: torch.Tensor | None = None,
    lengths: torch.Tensor | None = None,
) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
    """A one-layer LSTM over a right-padded batch from the zero state.

    x: (B, T, E); weights and biases as torch.nn.LSTM's layer 0; force_input: (B, T) bool or
    None; lengths: (B,) real tokens per row, or None for all T. Returns outputs (B, T, H),
    zero past each row's length, and (h, c), each (B, H), the state after each row's last real
    token.
    """
    batch, steps, _ = x.shape
    hidden = weight_hh.shape[1]
    gates_x = torch.addmm(bias_ih + bias_hh, x.reshape(batch * steps, -1),
                          weight_ih.t()).view(batch, steps, 4 * hidden)  # (B, T, 4H)
    h = x.new_zeros(batch, hidden)  # (B, H)
    c = x.new_zeros(batch, hidden)
    real = None
    if lengths is not None:
        real = torch.arange(steps, device=x.device)[None, :] < lengths[:, None]  # (B, T)
    outputs = []
    for t in range(steps):
        force = force_input[:, t] if force_input is not None else None
        h_t, c_t = lstm_cell_step(gates_x[:, t], h, c, weight_hh, force)
        if real is None:
            h, c = h_t, c_t
            outputs.append(h_t)
        else:
            keep = real[:, t, None]  # (B, 1): padded rows keep their state
            h, c = torch.where(keep, h_t, h), torch.where(keep, c_t, c)
            outputs.append(torch.where(keep, h_t, 0.0))
    return torch.stack(outputs, dim=1), (h, c)  # (B, T, H), ((B, H), (B, H))


class SifterLSTM(nn.Module):
    """One batch-first LSTM layer with the SIFTER input gate. Its parameters have
    torch.nn.LSTM's names and shapes, so an nn.LSTM's state dict loads unchanged; with an
    empty set it computes what nn.LSTM computes.

    The set is a (vocab_size,) bool lookup table, a non-persistent buffer: it moves with
    `.to(device)` and stays out of the state dict.
    """

    def __init__(self, input_size: int, hidden_size: int, *, vocab_size: int,
                 sentiment_ids: Iterable[int] = ()) -> None:
        super().__init__()
        self.input_size, self.hidden_size = input_size, hidden_size
        # registered in nn.LSTM's order, so reset_parameters draws the same numbers
        self.weight_ih_l0 = nn.Parameter(torch.empty(4 * hidden_size, input_size))
        self.weight_hh_l0 = nn.Parameter(torch.empty(4 * hidden_size, hidden_size))
        self.bias_ih_l0 = nn.Parameter(torch.empty(4 * hidden_size))
        self.bias_hh_l0 = nn.Parameter(torch.empty(4 * hidden_size))
        ids = sorted(set(sentiment_ids))
        if ids and not 0 <= ids[0] <= ids[-1] < vocab_size:
            raise ValueError(f"sentiment token ids must be in [0, {vocab_size}), got "
                             f"{ids[0]}..{ids[-1]}")
        table = torch.zeros(vocab_size, dtype=torch.bool)
        table[ids] = True
        self.register_buffer("sentiment_table", table, persistent=False)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        bound = 1.0 / math.sqrt(self.hidden_size)  # torch.nn.LSTM's initialisation
        for weight in self.parameters():
            nn.init.uniform_(weight, -bound, bound)

    def forward(self, embeddings: torch.Tensor, token_ids: torch.Tensor | None = None,
                lengths: torch.Tensor | None = None
                ) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
        """embeddings (B, T, E), token_ids (B, T) (None: no forcing), lengths (B,) for a
        right-padded batch -> outputs (B, T, H), (h, c) each (B, H) at each row's last real
        token."""
        force = self.sentiment_table[token_ids] if token_ids is not None else None  # (B, T)
        return sifter_lstm(embeddings, self.weight_ih_l0, self.weight_hh_l0, self.bias_ih_l0,
                           self.bias_hh_l0, force, lengths)

    def extra_repr(self) -> str:
        return (f"{self.input_size}, {self.hidden_size}, "
                f"sentiment_ids={int(self.sentiment_table.sum())}")
