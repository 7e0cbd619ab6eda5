"""Every sentray pooling, Ditto included, as a sentence-transformers model.

A directory written by `sentray.export.save_directory` (or by `jobs/evaluate.py --export-st DIR` and
jobs/train.py's export) holds the Hugging Face model files at its root, `sentray.json` naming the
pooling, Ditto head and max_length, and a `modules.json`: sentence-transformers' own Transformer
+ Pooling for mean and [CLS]; for Ditto and the other sentray poolings one `SentrayEncoder`
module, which sentence-transformers imports (sentray installed, `trust_remote_code=True`) and
which runs the same `sentray.encoder.embed_with` as every sentray job, so

    SentenceTransformer(DIR, trust_remote_code=True).encode(texts)
        == SentenceEncoder(EncoderConfig(model=DIR)).encode(texts)

and MTEB, LangChain or a vector database's embedder get sentray's embeddings. sentray's own
loaders read the same directory through `sentray.json`.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch
from sentence_transformers.base.modules.input_module import InputModule

from sentray import models
from sentray.encoder import EncoderConfig, SentenceEncoder, embed_with


class SentrayEncoder(InputModule):
    """Tokenizer, transformer and a sentray pooling as one sentence-transformers module."""

    save_in_root = True

    def __init__(self, encoder: SentenceEncoder) -> None:
        super().__init__()
        self.config = encoder.config
        self.model = encoder.model  # a submodule: sentence-transformers moves it between devices
        self.tokenizer = encoder.tokenizer
        self.max_seq_length = encoder.max_length
        self.fast_ditto = encoder.fast_ditto

    def preprocess(self, inputs, prompt: str | None = None, **kwargs) -> dict[str, torch.Tensor]:
        texts = [prompt + text for text in inputs] if prompt else list(inputs)
        return dict(self.tokenizer(texts, truncation=True, max_length=self.max_seq_length,
                                   padding=True, return_tensors="pt",
                                   return_token_type_ids=False))

    def forward(self, features: dict[str, torch.Tensor], **kwargs) -> dict[str, torch.Tensor]:
        device = next(self.model.parameters()).device
        features["sentence_embedding"] = embed_with(
            self.model, features["input_ids"].to(device), features["attention_mask"].to(device),
            pooling=self.config.pooling, layer_head=self.config.layer_head,
            fast_ditto=self.fast_ditto)  # (B, D)
        return features

    def get_sentence_embedding_dimension(self) -> int:
        return int(self.model.config.hidden_size)

    def save(self, output_path: str, *args, safe_serialization: bool = True, **kwargs) -> None:
        self.model.save_pretrained(output_path, safe_serialization=safe_serialization)
        self.tokenizer.save_pretrained(output_path)
        (Path(output_path) / models.SENTRAY_MODEL_INFO).write_text(json.dumps(
            {"pooling": self.config.pooling, "head": self.config.head,
             "max_length": self.max_seq_length}, indent=1))  # what load() reads back

    @classmethod
    def load(cls, model_name_or_path: str, subfolder: str = "", token=None, cache_folder=None,
             revision=None, local_files_only: bool = False, **kwargs) -> SentrayEncoder:
        # a local directory as it is; a Hub id downloaded (snapshot) the way sentence-transformers
        # fetches its own modules' files
        resolved = cls.load_dir_path(model_name_or_path, subfolder=subfolder, token=token,
                                     cache_folder=cache_folder, revision=revision,
                                     local_files_only=local_files_only)
        folder = Path(resolved or Path(model_name_or_path) / subfolder)
        if not (folder / models.SENTRAY_MODEL_INFO).is_file():
            raise FileNotFoundError(f"{folder} has no {models.SENTRAY_MODEL_INFO}: not a "
                                    "directory written by sentray")
        info = json.loads((folder / models.SENTRAY_MODEL_INFO).read_text())
        return cls(SentenceEncoder(EncoderConfig(
            model=str(folder), pooling=info["pooling"], head=info.get("head"),
            max_length=info.get("max_length"), device="cpu")))
