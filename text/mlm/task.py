"""MLM pretraining as a run of the owner (:class:`MLMTask`) and the build command's entry (:func:`pretrain_mlm`)."""
from __future__ import annotations

import dataclasses
import json
import math
import shutil
import zlib
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn

from suite.config import experiment_config, experiment_hash
from suite.memory import pin_malloc_threshold
from suite.registry import Registry, code_version, config_hash
from suite.safeio import write_atomic
from suite.train.legacy import Earlier
from suite.train.run import EXPORT, RunContext, RunResult, Task, Training, run
from suite.train.seeding import fixed_generator
from text.mlm.batches import bucketed_batches, collate, mask_tokens
from text.mlm.card import write_card
from text.mlm.config import DONE, HELDOUT_SEED, MLMConfig, output_dir
from text.mlm.corpus import read_corpus, split_heldout
from text.mlm.model import MLMObjective, build_model, mlm_loss
from text.mlm.tokenizer import load_tokenizer, tokenize_corpus, train_tokenizer



class MLMTask(Task[MLMConfig]):
    """MLM pretraining as a :class:`suite.train.run.Task` (task ``mlm``, headline: the held-out ``mlm_loss``).

    Counted in steps: the run owner seeds it (the masks are its generator ``mask``), places it, checkpoints it every
    ``checkpoint_every`` steps (``<out>/checkpoints/step-<N>.pt``; none is kept once the model is built), resumes it
    (config-checked; a folder of the layout before the owner too, from :attr:`earlier`), records the registry row and
    exports the model to ``<out>/export`` (transformers model + tokenizer + card + ``run.json``). The tokenizer is
    trained once into ``<out>/tokenizer``. Every
    ``eval_every`` steps the training loss means, tokens/s and learning rate go to split ``train`` and the held-out
    loss, accuracy and perplexity to split ``val``; the final held-out metrics are the evaluation."""

    modality, name, primary, eval_split = "text", "mlm", ("mlm_loss", "val"), "val"
    # the layout before the run owner: <out>/checkpoint.pt (removed once the model is built), the vocabulary at <out>
    earlier = Earlier(checkpoints=("checkpoint.pt",), removed_when_built=True, files={"tokenizer/vocab.txt": "vocab.txt"})

    def __init__(self) -> None:
        self.final: dict[str, float] = {}

    def dataset(self, cfg: MLMConfig) -> str:
        return "english+wiki"

    def loss_name(self, cfg: MLMConfig) -> str:
        return "mlm"

    def stem(self, cfg: MLMConfig) -> str:
        return f"mlm-s{cfg.seed}"

    def keep_checkpoints(self, cfg: MLMConfig) -> int:
        return 0  # the built model is the result; mlm.json marks it complete

    def build(self, cfg: MLMConfig, ctx: RunContext[MLMConfig]) -> Training:
        self.ctx, device, folder = ctx, ctx.device, ctx.folder
        pin_malloc_threshold()  # batches of varying length fragment the heap otherwise (RSS 3.5 -> 4.3 GB in 700 steps)
        self.corpus = corpus = read_corpus(cfg.corpus)
        self.train_idx, val_idx = split_heldout(len(corpus.sentences), cfg.heldout)
        tok_dir = ctx.path("tokenizer/vocab.txt").parent
        if (tok_dir / "vocab.txt").exists():
            tok = load_tokenizer(tok_dir, cfg.vocab_size)
        else:
            tok = train_tokenizer([corpus.sentences[i] for i in self.train_idx.tolist()], cfg.vocab_size, tok_dir)
        self.tokenizer, self.tok_dir = tok, tok_dir
        vocab = (tok_dir / "vocab.txt").read_bytes()
        key = config_hash({"counts": corpus.counts, "n": len(corpus.sentences), "vocab": zlib.crc32(vocab)})[:16]
        tokens, offsets = tokenize_corpus(tok, corpus.sentences, key)
        lengths = offsets[1:] - offsets[:-1]
        truncated = int((lengths > cfg.max_length - 2).sum())
        model = build_model(cfg, cfg.vocab_size).to(device)
        decay = [p for n, p in model.named_parameters() if p.ndim > 1]
        no_decay = [p for n, p in model.named_parameters() if p.ndim <= 1]
        opt = torch.optim.AdamW([{"params": decay, "weight_decay": cfg.weight_decay},
                                 {"params": no_decay, "weight_decay": 0.0}], lr=cfg.lr, betas=(0.9, 0.98), eps=1e-6)
        warm = max(1, int(cfg.warmup * cfg.steps))
        sched = torch.optim.lr_scheduler.LambdaLR(
            opt, lambda s: min((s + 1) / warm, max(0.0, (cfg.steps - s) / max(1, cfg.steps - warm))))
        gen = ctx.generator("mask")
        cls_id, sep_id, mask_id = (tok.convert_tokens_to_ids(t) for t in ("[CLS]", "[SEP]", "[MASK]"))

        def batch(idx: Tensor) -> tuple[Tensor, Tensor]:
            return collate(idx, tokens, offsets, cfg.max_length, cls_id, sep_id)

        def step(idx: Tensor) -> Tensor:
            ids, attn = batch(idx)
            inputs, labels = mask_tokens(ids, attn, cfg.mask_prob, cfg.vocab_size, gen, mask_id)
            return mlm_loss(model, inputs.to(device), attn.to(device), labels.to(device))[0]

        @torch.no_grad()
        def validate() -> dict[str, float]:
            if not len(val_idx):
                return {}
            model.eval()
            vgen = fixed_generator(HELDOUT_SEED)  # the same masks at every evaluation
            tot = correct = 0
            loss_sum = 0.0
            for idx in val_idx.split(256):
                ids, attn = batch(idx)
                inputs, labels = mask_tokens(ids, attn, cfg.mask_prob, cfg.vocab_size, vgen, mask_id)
                with ctx.engine.autocast():  # type: ignore[union-attr]
                    loss, c = mlm_loss(model, inputs.to(device), attn.to(device), labels.to(device))
                m = int((labels >= 0).sum())
                loss_sum += float(loss) * m
                correct += int(c)
                tot += m
            model.train()
            return {"mlm_loss": loss_sum / tot, "mlm_acc": correct / tot, "mlm_ppl": math.exp(loss_sum / tot)}

        def log_train() -> None:  # the training loss means since the last point, tokens/s, the learning rate
            engine = ctx.engine
            assert engine is not None
            rec = {f"train_{k}": v for k, v in engine.logger.means().items()}
            rec["tokens_per_s"] = engine.throughput.rate
            rec["lr"] = sched.get_last_lr()[0]
            ctx.log(rec, split="train", step=engine.step)
            engine.logger.reset()

        def on_step() -> None:
            s = ctx.engine.step  # type: ignore[union-attr]
            if cfg.eval_every and s % cfg.eval_every == 0:
                log_train()
                if s < cfg.steps:  # the last step's held-out metrics are the evaluation (evaluate)
                    ctx.log(validate(), split="val", step=s)

        self.validate, self.log_train = validate, log_train
        skipped = {name: {k: v for k, v in c.items() if k != "kept"} for name, c in corpus.counts.items()}
        self.skipped = skipped
        print(f"MLM corpus: {len(corpus.sentences)} sentences ({len(tokens)} tokens, {truncated} cut to "
              f"{cfg.max_length} tokens), skipped per file: {skipped}; {len(val_idx)} held out")
        data = {"n_sentences": len(corpus.sentences), "n_train": len(self.train_idx), "n_heldout": len(val_idx),
                "n_tokens": len(tokens), "truncated": truncated,
                **{f"skipped_empty:{k}": v["empty"] for k, v in skipped.items()},
                **{f"skipped_not_utf8:{k}": v["not_utf8"] for k, v in skipped.items()}}
        return Training(model, opt, lambda ep: bucketed_batches(self.train_idx, lengths, cfg.batch_size, cfg.seed, ep),
                        step, max_steps=cfg.steps, scheduler=sched, loss=MLMObjective(cfg.mask_prob),
                        precision="bf16" if cfg.bf16 else "fp32", on_step=on_step,
                        size=lambda idx: int(lengths[idx].clamp(max=cfg.max_length - 2).sum()) + 2 * len(idx),
                        rate_name="tokens_per_s", data_info=data, checkpoint_unit="step", log_epochs=True)

    def evaluate(self, cfg: MLMConfig, ctx: RunContext[MLMConfig], training: Training) -> dict[str, float]:
        if not cfg.eval_every or ctx.engine.step % cfg.eval_every:  # type: ignore[union-attr]
            self.log_train()
        self.final = self.validate()
        return self.final

    def export_module(self, cfg: MLMConfig, training: Training) -> nn.Module:
        return training.model

    def export(self, cfg: MLMConfig, ctx: RunContext[MLMConfig], training: Training, module: nn.Module,
               path: Path) -> None:
        module.save_pretrained(str(path), safe_serialization=True)  # type: ignore[operator]
        self.tokenizer.save_pretrained(str(path))
        shutil.copyfile(self.tok_dir / "vocab.txt", path / "vocab.txt")  # WordPiece's own file, as BERT folders have
        steps = ctx.engine.step  # type: ignore[union-attr]
        write_card(path, cfg, {"n_sentences": len(self.corpus.sentences), "steps": steps}, ctx.run)

def built_model(folder: Path) -> Path:
    """The transformers model of a built folder: ``<out>/export`` (run owner), or ``<out>`` (models built before)."""
    from text.models.backbone import model_folder

    return model_folder(folder) or folder / EXPORT

def pretrain_mlm(cfg: MLMConfig, registry: Registry | None = None) -> RunResult:
    """Build (or find already built) the MLM start model in :func:`output_dir` through the run owner; returns the
    owner's result (``folder``: the folder ``--backbone`` takes; ``export``: the transformers model in it;
    ``metrics``: the held-out ``mlm_loss``, ``mlm_acc``, ...) with the build record (``mlm.json``: config, run id,
    code version, steps, epochs, corpus counts) in ``info``. A model already built is not built again: ``reused``
    names its run."""
    out = output_dir(cfg)
    experiment = experiment_config(cfg)
    done = out / DONE
    if done.exists():
        try:
            recorded = json.loads(done.read_text())
        except (OSError, ValueError) as exc:
            raise ValueError(f"{done} is unreadable ({exc}); remove the folder {out} to rebuild the model") from None
        if recorded.get("config") != experiment:
            diff = sorted(k for k in set(experiment) | set(recorded.get("config") or {})
                          if experiment.get(k) != (recorded.get("config") or {}).get(k))
            raise ValueError(f"{out} holds an MLM model built with another configuration (differs in {diff}); "
                             f"choose another --out or remove the folder")
        print(f"MLM model already built in {out} (run {recorded.get('run_id')}): nothing to do")
        val = recorded.get("val") or {}
        return RunResult(out, recorded.get("run_id"), val, 0, 0, 0, 0.0, built_model(out),
                         reused=recorded.get("run_id"), recorded={f"val/{k}": v for k, v in val.items()},
                         info=recorded)

    # the folder is a built model's (``models:``), not a run's under runs/: without --out, models:mlm-<config hash>
    cfg = dataclasses.replace(cfg, out=cfg.out or f"models:mlm-{experiment_hash(cfg)}")
    task = MLMTask()
    res = run(task, cfg, registry=registry)
    engine = task.ctx.engine
    assert engine is not None
    epochs = engine.epoch + engine.batch_in_epoch / max(1, len(task.train_idx) // cfg.batch_size)
    res.info = {"config": experiment, "run_id": res.run_id, "code_version": code_version(), "steps": res.steps,
                "val": task.final, "epochs": epochs, "wall_s": res.wall_s, "n_sentences": len(task.corpus.sentences),
                "skipped": task.skipped}
    write_atomic(done, json.dumps(res.info, indent=1, sort_keys=True), what="MLM build record")
    return res
