"""The contrastive trainer's checkpoints: what a checkpoint folder holds (`Checkpointing`), the
checkpoints of a run that has already finished, and the export of one as the trained model."""

from __future__ import annotations

import json
import logging
import posixpath
import tempfile
from pathlib import Path

import torch

from sentray.contrastive.config import TrainConfig
from sentray.contrastive.model import ContrastiveModel
from sentray.encode.config import EncoderConfig
from sentray.encode.encoder import SentenceEncoder
from sentray.encode.export import save_model_directory
from sentray.encode.plan import EncoderPlan, model_plan
from sentray.kit import storage

logger = logging.getLogger(__name__)


class Checkpointing:
    """What a checkpoint folder holds. `model/` is a complete Hugging Face directory (weights of
    the encoder, config, tokenizer), ready for export."""

    MODEL, HEAD, STATE = "model", "mlp.pt", "trainer.pt"

    @staticmethod
    def save(folder: Path, model: ContrastiveModel, tokenizer, optimizer, scheduler, scaler,
             state: dict) -> None:
        model.encoder.save_pretrained(folder / Checkpointing.MODEL)
        tokenizer.save_pretrained(folder / Checkpointing.MODEL)
        if model.mlp is not None:
            torch.save(model.mlp.state_dict(), folder / Checkpointing.HEAD)
        torch.save({"optimizer": optimizer.state_dict(), "scheduler": scheduler.state_dict(),
                    "scaler": scaler.state_dict() if scaler is not None else None,
                    **state}, folder / Checkpointing.STATE)
        (folder / "state.json").write_text(json.dumps(state, indent=1))


def finished_checkpoints(run_folder: storage.Location, total_steps: int):
    """(best by STS-B dev, latest) checkpoints of a run that has already trained `total_steps`
    steps, else None: rerunning a finished run exports it again without starting a worker.
    Folders without a readable state.json (a checkpoint cut off mid-write) are not counted."""
    import pyarrow.fs as pafs
    import ray.train

    filesystem = run_folder.filesystem
    states = []
    for info in storage.entries(run_folder):
        if (info.type != pafs.FileType.Directory
                or not posixpath.basename(info.path).startswith("checkpoint_")):
            continue
        try:
            with filesystem.open_input_stream(posixpath.join(info.path, "state.json")) as f:
                states.append((json.loads(f.read()), info.path))
        except (FileNotFoundError, OSError, ValueError):
            continue
    if not states or max(state["step"] for state, _ in states) < total_steps:
        return None

    def checkpoint(path: str):
        return ray.train.Checkpoint(path, filesystem=filesystem if run_folder.is_s3 else None)

    # the best as Ray Train ranks them (the score each was reported with), the earliest of ties
    best = max(states, key=lambda s: (s[0]["history"][-1]["stsb_dev"], -s[0]["step"]))
    latest = max(states, key=lambda s: s[0]["step"])
    return checkpoint(best[1]), checkpoint(latest[1])


def export_checkpoint(checkpoint, output: storage.Location, config: TrainConfig,
                      encoder: EncoderPlan, record: dict) -> dict:
    """The checkpoint's encoder, without the training MLP, as OUTPUT/best (Hugging Face model
    folder + tokenizer + sentray.json naming the pooling) and OUTPUT/best-st (the same as a
    sentence-transformers folder, for every pooling: `sentray.encode.export`). The encoding
    max_length is the initial model's."""
    extra = {"base_model": config.encoder.model, "objective": config.objective,
             "step": record["step"], "stsb_dev": record["stsb_dev"]}
    exported = {}
    with checkpoint.as_directory() as folder, tempfile.TemporaryDirectory() as staging:
        # the checkpoint's model, a folder of its own, read out as the run's at the initial
        # model's length
        trained = SentenceEncoder(model_plan(EncoderConfig(
            model=str(Path(folder) / Checkpointing.MODEL), pooling=encoder.pooling,
            head=encoder.head, max_length=encoder.model_max_length, device="cpu")))
        for name, st_files in (("best", False), ("best-st", True)):
            save_model_directory(trained, Path(staging) / name, extra=extra,
                                 sentence_transformers=st_files)
            _replace_folder(Path(staging) / name, output.join(name))
            exported[name] = output.join(name).uri
    logger.info("exported step %d (STS-B dev %.2f): %s", record["step"], record["stsb_dev"],
                exported)
    return exported


def _replace_folder(source: Path, target: storage.Location) -> None:
    import pyarrow.fs as pafs

    target.filesystem.delete_dir_contents(target.path, missing_dir_ok=True)
    target.filesystem.create_dir(target.path, recursive=True)
    pafs.copy_files(str(source), target.path, source_filesystem=pafs.LocalFileSystem(),
                    destination_filesystem=target.filesystem)
