"""Every sentray pooling, Ditto included, as a sentence-transformers model.

A folder written by `sentray.encode.export.save_model_directory` (`jobs/evaluate.py --export-st
DIR`, training's OUTPUT/best-st) holds the Hugging Face model files at its root, `sentray.json`
naming the pooling, Ditto head and max_length, and sentence-transformers' own files: its
Transformer + Pooling modules for mean and [CLS]; for Ditto and the other sentray poolings one
`SentrayEncoder` module, which runs the same `PooledEncoder` as every sentray job; either way
followed by sentence-transformers' `Normalize` when the source model normalizes (sentray.json's
`normalize`, which sentray's jobs read), so

    SentenceTransformer(DIR, trust_remote_code=True).encode(texts)
        == SentenceEncoder(plan_encoder(EncoderConfig(model=DIR))).encode(texts)

and MTEB, LangChain or a vector database's embedder get sentray's embeddings. sentray's own
loaders read the same folder through `sentray.json`.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch
from sentence_transformers.base.modules.input_module import InputModule

from sentray.encode.config import EncoderConfig
from sentray.encode.encoder import SentenceEncoder
from sentray.encode.model_files import SENTRAY_MODEL_INFO, ModelInfo
from sentray.encode.plan import model_plan


class SentrayEncoder(InputModule):
    """Tokenizer, transformer and a sentray pooling as one sentence-transformers module."""

    save_in_root = True

    def __init__(self, encoder: SentenceEncoder, extra: dict | None = None) -> None:
        super().__init__()
        self.plan = encoder.plan
        self.pooled = encoder.pooled  # a submodule: sentence-transformers moves it between devices
        self.tokenizer = encoder.tokenizer
        self.max_seq_length = encoder.max_length
        self.extra = dict(extra or {})  # what sentray.json records besides the read-out

    @property
    def info(self) -> ModelInfo:
        return ModelInfo(self.plan.pooling, self.plan.head, self.max_seq_length, self.extra)

    def preprocess(self, inputs, prompt: str | None = None, **kwargs) -> dict[str, torch.Tensor]:
        texts = [prompt + text for text in inputs] if prompt else list(inputs)
        return dict(self.tokenizer(texts, truncation=True, max_length=self.max_seq_length,
                                   padding=True, return_tensors="pt",
                                   return_token_type_ids=False))

    def forward(self, features: dict[str, torch.Tensor], **kwargs) -> dict[str, torch.Tensor]:
        device = next(self.pooled.parameters()).device
        features["sentence_embedding"] = self.pooled(
            features["input_ids"].to(device), features["attention_mask"].to(device))  # (B, D)
        return features

    def get_sentence_embedding_dimension(self) -> int:
        return self.pooled.dimension

    def save(self, output_path: str, *args, safe_serialization: bool = True, **kwargs) -> None:
        self.pooled.model.save_pretrained(output_path, safe_serialization=safe_serialization)
        self.tokenizer.save_pretrained(output_path)
        self.info.write(output_path)  # what load() reads back

    @classmethod
    def load(cls, model_name_or_path: str, subfolder: str = "", token=None, cache_folder=None,
             revision=None, local_files_only: bool = False, **kwargs) -> SentrayEncoder:
        # a local directory as it is; a Hub id downloaded (snapshot) the way sentence-transformers
        # fetches its own modules' files
        resolved = cls.load_dir_path(model_name_or_path, subfolder=subfolder, token=token,
                                     cache_folder=cache_folder, revision=revision,
                                     local_files_only=local_files_only)
        folder = Path(resolved or Path(model_name_or_path) / subfolder)
        if not (folder / SENTRAY_MODEL_INFO).is_file():
            raise FileNotFoundError(f"{folder} has no {SENTRAY_MODEL_INFO}: not a directory "
                                    "written by sentray")
        # fp32 on torch, the read-out and length its sentray.json records (the model's own)
        plan = model_plan(EncoderConfig(model=str(folder), device="cpu"))
        info = ModelInfo.read(plan.model)
        return cls(SentenceEncoder(plan), info.extra)


MODULE_TYPE = f"{SentrayEncoder.__module__}.{SentrayEncoder.__qualname__}"


def load_sentence_transformer(folder: str | Path, device: str | None = None):
    """A model folder sentray wrote, as a `SentenceTransformer`, without `trust_remote_code`.

    sentence-transformers imports a module class that is not its own only with
    `trust_remote_code=True`, and that flag trusts whatever class a folder's `modules.json`
    names (its `module_classes` way of naming trusted classes is private, "not a way around the
    flag"). So: a folder of sentence-transformers' own modules (mean, [CLS]) loads as it is; a
    folder whose module is sentray's `SentrayEncoder` (then, for a normalizing model,
    sentence-transformers' `Normalize`) gets that class from the installed sentray package,
    built here; any other module type is refused (no code of the folder's choosing runs)."""
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Normalize

    folder = Path(folder)
    modules_file = folder / "modules.json"
    if not modules_file.is_file():
        raise FileNotFoundError(f"{folder} has no modules.json: not a sentence-transformers "
                                "folder")
    types = [module["type"] for module in json.loads(modules_file.read_text())]
    if all(kind.startswith("sentence_transformers.") for kind in types):
        return SentenceTransformer(str(folder), device=device)
    # sentence-transformers' own Normalize under any of its import paths; built here, never
    # imported by the folder's name
    normalized = (len(types) == 2 and types[1].startswith("sentence_transformers.")
                  and types[1].endswith(".Normalize"))
    if types[:1] != [MODULE_TYPE] or (len(types) > 1 and not normalized):
        raise ValueError(f"{modules_file} names modules {types}: not a folder sentray wrote. "
                         "Load it with SentenceTransformer(..., trust_remote_code=True) only if "
                         "you trust the code those classes run.")
    modules = [SentrayEncoder.load(str(folder))] + ([Normalize()] if normalized else [])
    return SentenceTransformer(modules=modules, device=device)
