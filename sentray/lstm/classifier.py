"""The SST-2 classifier of SIFTER-LSTM and the LSTM baseline: WordPiece embeddings initialised
from a pretrained encoder's input embedding matrix and trained, dropout 0.2 on the embeddings
and on the LSTM output, one LSTM layer of half the embedding size (`SifterLSTM`, or
torch.nn.LSTM on packed sequences, cuDNN on GPU, for the baseline), the last real token's
hidden state -> Linear -> 2 logits."""

from __future__ import annotations

from collections.abc import Iterable

import torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence

from sentray.lstm.cell import SifterLSTM
from sentray.lstm.config import CELLS, Cell

NUM_CLASSES = 2


class LSTMClassifier(nn.Module):
    """Word pieces (B, T) + lengths (B,) -> logits (B, 2): trainable embeddings, dropout, one
    LSTM layer (`cell`), dropout on its last real hidden state, Linear."""

    def __init__(self, embedding_weight: torch.Tensor, *, cell: Cell = "lstm",
                 sentiment_ids: Iterable[int] = (), dropout: float = 0.2,
                 hidden_size: int | None = None, num_classes: int = NUM_CLASSES) -> None:
        super().__init__()
        if cell not in CELLS:
            raise ValueError(f"cell must be one of {CELLS}, got {cell!r}")
        sentiment_ids = tuple(sentiment_ids)
        if cell == "lstm" and sentiment_ids:
            raise ValueError("sentiment_ids are read by the sifter cell only; the lstm baseline "
                             "takes none")
        vocab_size, embedding_size = embedding_weight.shape
        hidden_size = hidden_size or embedding_size // 2
        self.cell = cell
        self.embeddings = nn.Embedding.from_pretrained(embedding_weight.detach().clone(),
                                                       freeze=False)
        # SifterLSTM draws its initial weights as nn.LSTM does: one seed, one start, both cells.
        if cell == "sifter":
            self.rnn = SifterLSTM(embedding_size, hidden_size, vocab_size=vocab_size,
                                  sentiment_ids=sentiment_ids)
        else:
            self.rnn = nn.LSTM(embedding_size, hidden_size, batch_first=True)
        self.dropout = nn.Dropout(dropout)
        self.classifier = nn.Linear(hidden_size, num_classes)

    def forward(self, input_ids: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        """input_ids (B, T) right-padded, lengths (B,) (best on the CPU: packing reads them
        there) -> logits (B, 2)."""
        x = self.dropout(self.embeddings(input_ids))  # (B, T, E)
        if self.cell == "sifter":
            _, (last, _) = self.rnn(x, input_ids, lengths.to(x.device))  # (B, H)
        else:
            packed = pack_padded_sequence(x, lengths.cpu(), batch_first=True,
                                          enforce_sorted=False)
            _, (last, _) = self.rnn(packed)  # (1, B, H), in the batch's order
            last = last[0]
        return self.classifier(self.dropout(last))  # (B, 2)
