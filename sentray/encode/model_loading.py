"""A model loaded: its transformers config, tokenizer and encoder (`load_*`), from a model
looked up once (`sentray.encode.model_lookup.ResolvedModel`). A local directory or a packaged
model is read from disk; a Hub id goes through `transformers.from_pretrained`, which downloads
and caches it (on clusters with internet) and, when it cannot, says what was tried.
"""

from __future__ import annotations

import logging
import os
from typing import TYPE_CHECKING

from sentray.encode.model_lookup import PACKAGED_MODELS, ResolvedModel

if TYPE_CHECKING:
    import torch

logger = logging.getLogger(__name__)

# Architectures whose self-attention is `encoder.layer[l].attention.self.{query,key}` with plain
# absolute positions, so one head's attention can be recomputed from the layer input (fast Ditto).

# config fields that hold a dropout probability, across architectures
DROPOUT_KEYS = ("hidden_dropout_prob", "attention_probs_dropout_prob", "dropout",
                "attention_dropout")

def _hub_error(name: str, exc: Exception) -> FileNotFoundError:
    """A model not found anywhere it was looked for: bad input (`sentray.cli`), an OSError
    still for callers that catch those."""
    offline = os.environ.get("HF_HUB_OFFLINE", "0") not in ("0", "", "false", "False")
    why = "HF_HUB_OFFLINE is set" if offline else "the Hugging Face Hub could not be reached"
    return FileNotFoundError(
        f"could not load model {name!r}: it is not a local directory, not a packaged model "
        f"({', '.join(sorted(PACKAGED_MODELS))}), and {why}. Pass a local model directory, a "
        f"packaged name, or run where the Hub is reachable. Cause: {type(exc).__name__}: {exc}")


def _from_pretrained(auto_class, model: ResolvedModel, **kwargs):
    """`auto_class.from_pretrained` on the resolved path; a Hub failure says what was tried."""
    try:
        return auto_class.from_pretrained(model.path, **kwargs)
    except OSError as exc:
        if model.is_local:
            raise
        raise _hub_error(model.name, exc) from exc


def load_config(model: ResolvedModel):
    """The model's `transformers` config (cheap: reads config.json only)."""
    from transformers import AutoConfig

    return _from_pretrained(AutoConfig, model)


def load_tokenizer(model: ResolvedModel):
    from transformers import AutoTokenizer

    return _from_pretrained(AutoTokenizer, model)


def load_encoder(
    model: ResolvedModel,
    *,
    attn_implementation: str | None = None,
    device: str | torch.device = "cpu",
    dropout: float | None = None,
) -> torch.nn.Module:
    """The bare transformer encoder (`AutoModel`), in eval mode, on `device`.

    `attn_implementation="eager"` is required wherever attention weights are read: with SDPA,
    transformers 5 silently returns no attentions. None lets transformers choose (SDPA where the
    architecture supports it). `dropout` overrides every dropout probability the config has
    (training); None keeps the model's own.
    """
    from transformers import AutoModel

    kwargs = {}
    if dropout is not None:
        config = load_config(model)
        kwargs = {key: dropout for key in DROPOUT_KEYS if hasattr(config, key)}
        if not kwargs:
            raise ValueError(f"model {model.name!r} ({config.model_type}) has none of the "
                             f"dropout settings {DROPOUT_KEYS}; cannot set dropout={dropout}")
    encoder = _from_pretrained(AutoModel, model, attn_implementation=attn_implementation,
                               **kwargs)
    return encoder.to(device).eval()
