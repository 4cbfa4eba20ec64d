"""SFT warm start and GRPO for the planner with trl, plus sampling a planner for filtering.

Both trainers start from a model folder and return a new folder (a temporary directory the
model store then moves into place). Training curves go to ``log_metrics(name_values, step)``,
which the pipeline wires to MLflow; core code knows nothing about the tracker.
"""

from __future__ import annotations

import logging
import statistics
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mera_pipelines.core.errors import ConfigError
from mera_pipelines.core.llm.base import ChatMessage
from mera_pipelines.core.settings import settings_from_params

logger = logging.getLogger(__name__)

MetricsLogger = Callable[[dict[str, float], int], None]

TARGET_CHOICES = ("all", "best_reward")  # training.sft.target_choice


@dataclass(frozen=True)
class SFTSettings:
    enabled: bool = True
    max_steps: int = 60
    batch_size: int = 4
    learning_rate: float = 5e-5
    max_length: int = 768
    # Train only on teacher plans the GRPO reward would not penalise. The heuristic teacher's
    # later-round plans are often empty (scored as unparseable) or ask one or two words.
    skip_penalised_plans: bool = False
    # name -> heuristic planner settings (e.g. one_query: {keyword_intent: false}): each
    # variant's plan for a state is a further target beside the teacher's when it differs
    # (core.training.states.sft_targets), so the planner learns several valid plans per prompt
    variant_targets: dict[str, dict[str, Any]] = field(default_factory=dict)
    # "all": every target above trains; "best_reward": per state only the one whose plan earns
    # the highest reward there (the teacher's on ties), so SFT learns which rule fits a state
    target_choice: str = "all"
    seed: int = 0
    use_cpu: bool = True  # false on GPUs (conf/paper)
    bf16: bool = False
    # trl turns activation recomputation on by default to save GPU memory; on a CPU with RAM
    # to spare it only costs a second forward pass per step (benchmarks/bench_grpo.py)
    gradient_checkpointing: bool = False

    def __post_init__(self) -> None:
        if self.target_choice not in TARGET_CHOICES:
            raise ConfigError(
                f"training.sft.target_choice must be one of {list(TARGET_CHOICES)}, "
                f"got {self.target_choice!r}"
            )

    @classmethod
    def from_params(cls, params: dict[str, Any] | None) -> SFTSettings:
        return settings_from_params(cls, params, "training.sft")


@dataclass(frozen=True)
class GRPOSettings:
    steps: int = 30
    num_generations: int = 4  # group size G
    prompts_per_step: int = 1
    learning_rate: float = 1e-6
    beta: float = 0.0  # KL coefficient (trl's default: no reference model)
    epsilon: float = 0.2  # clip range
    temperature: float = 1.0
    max_completion_length: int = 96
    # completions per forward/backward pass (null: all prompts_per_step x num_generations at
    # once). The step's completions are still generated, scored and applied as one update
    # (gradients accumulated); peak memory falls with it (groups of 16 ran out of 24 GB on CPU)
    micro_batch_size: int | None = None
    seed: int = 0
    use_cpu: bool = True  # false on GPUs (conf/paper)
    bf16: bool = False
    gradient_checkpointing: bool = False  # as for SFT; true on GPUs short of memory
    use_vllm: bool = False  # trl's vLLM generation (GPU only)
    vllm_mode: str = "colocate"  # or "server" (`trl vllm-serve`)
    # any further GRPOConfig fields, passed through (e.g. vllm_server_base_url);
    # conf/grpo_gpu sets them for GPUs
    trl_extra: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_params(cls, params: dict[str, Any] | None) -> GRPOSettings:
        settings = settings_from_params(cls, params, "training.grpo")
        if settings.num_generations < 2:
            raise ConfigError("training.grpo.num_generations must be >= 2 (group advantages)")
        completions = settings.completions_per_step
        micro = settings.micro_batch_size
        if micro is not None and (micro < 1 or completions % micro):
            raise ConfigError(
                f"training.grpo.micro_batch_size must divide prompts_per_step x "
                f"num_generations = {completions}, got {micro}"
            )
        set_here = set(cls.__dataclass_fields__) | set(_grpo_arguments(settings, Path()))
        own = sorted(set(settings.trl_extra) & set_here)
        if own:
            raise ConfigError(
                f"training.grpo.trl_extra sets {own}, which training.grpo already sets "
                "(a setting of its own, or an argument derived from one): set them there"
            )
        return settings

    @property
    def completions_per_step(self) -> int:
        return self.prompts_per_step * self.num_generations


def planner_prompt_settings(training_params: dict[str, Any] | None) -> dict[str, Any]:
    """``training.prompt``: how a planner prompt is cut, whether it carries the heuristic's
    draft plan or the question's topic labels and names (``hints``), how long its reply may
    be, and whether the heuristic's intents follow the model's when the plan is searched
    (``complement``).

    The same for the teacher, SFT, filtering, GRPO and, through the planner's metadata,
    evaluation; the reply limit defaults to GRPO's completion length."""
    params = training_params or {}
    grpo = GRPOSettings.from_params(params.get("grpo"))
    prompt = dict(params.get("prompt") or {})
    return {
        "graph_chars": int(prompt.get("graph_chars", 600)),
        "draft": bool(prompt.get("draft", False)),
        "complement": bool(prompt.get("complement", False)),
        "hints": bool(prompt.get("hints", False)),
        "max_tokens": int(prompt.get("max_tokens", grpo.max_completion_length)),
    }


@dataclass
class TrainingLog:
    """What a trainer did: its log history and the seconds of each optimisation step."""

    steps: int = 0
    seconds: float = 0.0
    step_seconds: list[float] = field(default_factory=list)
    history: list[dict[str, float]] = field(default_factory=list)

    @property
    def median_step_seconds(self) -> float | None:
        return statistics.median(self.step_seconds) if self.step_seconds else None

    def curve(self, key: str) -> list[float]:
        return [h[key] for h in self.history if key in h]

    def steps_with(self, key: str) -> list[int]:
        """The optimizer steps at which ``key`` was logged: for GRPO's reward, the steps that
        generated and scored completions (every step, unless trl's ``num_iterations`` reuses
        one batch for several updates)."""
        return [int(h["step"]) for h in self.history if key in h]

    def summary(self) -> dict[str, Any]:
        last = next((h for h in reversed(self.history) if "loss" in h), {})
        return {
            "steps": self.steps,
            "seconds": round(self.seconds, 2),
            "median_step_seconds": self.median_step_seconds,
            "final_loss": last.get("loss"),
            "loss_curve": self.curve("loss"),
        }


def _callback(log: TrainingLog, prefix: str, log_metrics: MetricsLogger | None):
    from transformers import TrainerCallback

    class Tracking(TrainerCallback):
        def on_step_begin(self, args, state, control, **kwargs):
            self._started = time.perf_counter()

        def on_step_end(self, args, state, control, **kwargs):
            log.step_seconds.append(time.perf_counter() - getattr(self, "_started", 0.0))

        def on_log(self, args, state, control, logs=None, **kwargs):
            numbers = {k: float(v) for k, v in (logs or {}).items() if _is_number(v)}
            log.history.append({**numbers, "step": state.global_step})
            if log_metrics and numbers:
                log_metrics(
                    {f"{prefix}.{_metric_name(k)}": v for k, v in numbers.items()},
                    state.global_step,
                )

    return Tracking()


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _metric_name(key: str) -> str:
    # MLflow metric names allow "/", but flat names read better in the UI next to ours
    return key.replace("/", ".")


def _common_arguments(settings: SFTSettings | GRPOSettings, output: Path) -> dict[str, Any]:
    """Trainer arguments SFT and GRPO share: log every step, save only at the end, no hub,
    no external trackers (curves go to MLflow through the callback)."""
    return {
        "output_dir": str(output / "trainer"),
        "learning_rate": settings.learning_rate,
        "logging_steps": 1,
        "save_strategy": "no",
        "report_to": "none",
        "use_cpu": settings.use_cpu,
        "bf16": settings.bf16,
        # transformers 5.24 renamed gradient_checkpointing; trl still defaults the old name to
        # True, so only setting the new one both turns it off and avoids a FutureWarning
        "activation_checkpointing": settings.gradient_checkpointing,
        "seed": settings.seed,
        "dataloader_num_workers": 0,
    }


def _grpo_arguments(settings: GRPOSettings, output: Path) -> dict[str, Any]:
    """GRPOConfig arguments from the settings (``trl_extra`` comes on top).

    A micro-batch smaller than the step's completions becomes gradient accumulation; trl then
    generates ``steps_per_generation`` (= the accumulation steps) micro-batches at once, so a
    step still samples and scores its whole groups before one optimizer update."""
    micro_batch = settings.micro_batch_size or settings.completions_per_step
    return {
        **_common_arguments(settings, output),
        "max_steps": settings.steps,
        "per_device_train_batch_size": micro_batch,
        "gradient_accumulation_steps": settings.completions_per_step // micro_batch,
        "num_generations": settings.num_generations,
        "max_completion_length": settings.max_completion_length,
        "beta": settings.beta,
        "epsilon": settings.epsilon,
        "temperature": settings.temperature,
        "use_vllm": settings.use_vllm,
        "vllm_mode": settings.vllm_mode,
    }


def _train_and_save(trainer: Any, tokenizer: Any, log: TrainingLog, output: Path):
    """Train, time it, and save model + tokenizer as a loadable folder under ``output``."""
    started = time.perf_counter()
    trainer.train()
    log.seconds = time.perf_counter() - started
    log.steps = trainer.state.global_step
    folder = output / "model"
    trainer.save_model(str(folder))
    tokenizer.save_pretrained(folder)
    return folder, log


def _load(folder: Path, threads: int | None):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    if threads:
        torch.set_num_threads(int(threads))
    tokenizer = AutoTokenizer.from_pretrained(folder, local_files_only=True)
    if tokenizer.chat_template is None:
        raise ConfigError(f"The tokenizer in '{folder}' has no chat template")
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    model = AutoModelForCausalLM.from_pretrained(folder, local_files_only=True, dtype=torch.float32)
    return model, tokenizer


def run_sft(
    base_folder: Path,
    examples: Sequence[tuple[list[ChatMessage], str]],
    settings: SFTSettings,
    threads: int | None = None,
    log_metrics: MetricsLogger | None = None,
) -> tuple[Path, TrainingLog]:
    """Supervised warm start on (prompt messages, teacher reply) pairs; completion-only loss."""
    from datasets import Dataset
    from trl import SFTConfig, SFTTrainer

    if not examples:
        raise ConfigError("SFT has no examples: no planner states were collected")
    model, tokenizer = _load(base_folder, threads)
    rows = [
        {"prompt": prompt, "completion": [{"role": "assistant", "content": reply}]}
        for prompt, reply in examples
    ]
    output = Path(tempfile.mkdtemp(prefix="mera-sft-"))
    config = SFTConfig(
        **_common_arguments(settings, output),
        max_steps=settings.max_steps,
        per_device_train_batch_size=settings.batch_size,
        max_length=settings.max_length,
    )
    log = TrainingLog()
    trainer = SFTTrainer(
        model=model,
        args=config,
        train_dataset=Dataset.from_list(rows),
        processing_class=tokenizer,
        callbacks=[_callback(log, "sft", log_metrics)],
    )
    return _train_and_save(trainer, tokenizer, log, output)


def run_grpo(
    start_folder: Path,
    rows: Sequence[dict[str, Any]],
    reward_function: Callable[..., list[float]],
    settings: GRPOSettings,
    threads: int | None = None,
    log_metrics: MetricsLogger | None = None,
    on_policy: Callable[[Any, Any], None] | None = None,
) -> tuple[Path, TrainingLog]:
    """GRPO on planner states. Each row: ``prompt`` (chat messages) plus the columns the
    reward reads (memory_id, gold_turn_ids, viewed_turn_ids, round_index). ``on_policy`` is
    given the model being trained and its tokenizer before training starts (a reward that
    plays later rounds with the policy holds on to them)."""
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    if not rows:
        raise ConfigError(
            "GRPO has no training states: rollout filtering kept none (try more synthesised "
            "questions, a larger training.filtering.max_states or another group size)"
        )
    model, tokenizer = _load(start_folder, threads)
    output = Path(tempfile.mkdtemp(prefix="mera-grpo-"))
    config = GRPOConfig(**_grpo_arguments(settings, output), **settings.trl_extra)
    log = TrainingLog()
    trainer = GRPOTrainer(
        model=model,
        reward_funcs=[reward_function],
        args=config,
        train_dataset=Dataset.from_list(list(rows)),
        processing_class=tokenizer,
        callbacks=[_callback(log, "grpo", log_metrics)],
    )
    if on_policy is not None:
        on_policy(trainer.model, tokenizer)
    return _train_and_save(trainer, tokenizer, log, output)


class PlannerSampler:
    """Samples several replies of a model folder for one prompt (rollout filtering)."""

    def __init__(
        self,
        folder: Path,
        max_new_tokens: int = 96,
        temperature: float = 1.0,
        threads: int | None = None,
        seed: int = 0,
    ) -> None:
        self.folder = folder
        self.max_new_tokens = max_new_tokens
        self.temperature = temperature
        self.threads = threads
        self.seed = seed
        self._model = None
        self._tokenizer = None

    def sample(self, messages: list[ChatMessage], n: int) -> list[str]:
        import torch

        if self._model is None:
            self._model, self._tokenizer = _load(self.folder, self.threads)
            self._model.eval()
            torch.manual_seed(self.seed)
        tokenizer = self._tokenizer
        encoded = tokenizer.apply_chat_template(
            messages,
            add_generation_prompt=True,
            tokenize=True,
            return_dict=True,
            return_tensors="pt",
        )
        with torch.inference_mode():
            output = self._model.generate(
                **encoded,
                do_sample=True,
                temperature=self.temperature,
                top_p=1.0,
                top_k=0,
                max_new_tokens=self.max_new_tokens,
                num_return_sequences=n,
                pad_token_id=tokenizer.pad_token_id,
            )
        start = encoded["input_ids"].shape[1]
        return [tokenizer.decode(row[start:], skip_special_tokens=True).strip() for row in output]
