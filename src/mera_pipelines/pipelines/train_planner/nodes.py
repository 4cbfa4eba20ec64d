"""Thin nodes over ``core.training``: base model, SFT, rollout filtering, GRPO."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, fields
from pathlib import Path
from typing import Any

import pandas as pd
from tqdm.auto import tqdm

from mera_pipelines.core.errors import ConfigError
from mera_pipelines.core.llm.smollm2 import DEFAULT_TARGET, ensure_smollm2
from mera_pipelines.core.loop import LoopSettings
from mera_pipelines.core.memory import MemoryIndex
from mera_pipelines.core.records import Question, from_frame
from mera_pipelines.core.roles.planner import Planner, make_planner
from mera_pipelines.core.training.continuation import (
    PolicyContinuation,
    TrajectoryReplay,
    continuation_report,
)
from mera_pipelines.core.training.model_store import (
    PlannerModel,
    PlannerModelStore,
    read_model_folder,
    resolve_planner,
)
from mera_pipelines.core.training.reward import RewardSettings, plan_is_clean
from mera_pipelines.core.training.rollouts import (
    RetrievalReward,
    best_reward_targets,
    complement_column,
    filter_states,
)
from mera_pipelines.core.training.states import (
    PlannerStateRecord,
    collection_roles,
    record_prompt,
    sft_targets,
)
from mera_pipelines.core.training.trainers import (
    GRPOSettings,
    PlannerSampler,
    SFTSettings,
    planner_prompt_settings,
    run_grpo,
    run_sft,
)
from mera_pipelines.pipelines.tracking import mlflow_step_logger


def prepare_base_planner(params: dict[str, Any]) -> PlannerModel:
    """The model training starts from: the packaged SmolLM2 (converted once) or a folder."""
    base = dict(params.get("base_model") or {})
    kind = base.get("kind", "smollm2")
    if kind == "smollm2":
        folder = ensure_smollm2(base.get("path") or DEFAULT_TARGET)
    elif kind == "folder":
        if not base.get("path"):
            raise ConfigError("training.base_model.kind 'folder' needs 'path'")
        folder = read_model_folder(base["path"]).folder
    else:
        raise ConfigError(f"training.base_model.kind must be 'smollm2' or 'folder', got {kind!r}")
    return PlannerModel(Path(folder), {"stage": "base", "base_model": str(folder)})


def warm_start_planner(
    base: PlannerModel,
    states: pd.DataFrame,
    collect_report: dict[str, Any],
    split: dict[str, Any],
    memory: MemoryIndex,
    questions: pd.DataFrame,
    params: dict[str, Any],
    loop_params: dict[str, Any],
) -> tuple[PlannerModel, dict[str, Any]]:
    """SFT on the teacher's plans for the collected states (or the base model unchanged);
    with ``training.sft.target_choice: best_reward``, on the best-scoring of the teacher's and
    the variants' plans per state, each executed against ``memory``."""
    settings = SFTSettings.from_params(params.get("sft"))
    prompt = planner_prompt_settings(params)
    metadata = {
        "base_model": base.metadata.get("base_model", str(base.folder)),
        "train_memory_ids": split["train_memory_ids"],
        "prompt": prompt,
    }
    teacher = collect_report.get("teacher") or "heuristic"  # reports before the option: heuristic
    if not settings.enabled:
        return PlannerModel(base.folder, {**metadata, "stage": "base"}), {"enabled": False}
    prompt_for = record_prompt(prompt)
    variants = _variant_planners(settings.variant_targets)
    records = _records(states)
    targets = [sft_targets(record, variants) for record in records]
    choice = None
    if settings.target_choice == "best_reward":
        if not variants:
            raise ConfigError(
                "training.sft.target_choice best_reward chooses among the teacher's and the "
                "variants' plans: set training.sft.variant_targets"
            )
        loop, reward, replay = _scoring(memory, questions, params, loop_params)
        best, choice = best_reward_targets(
            records,
            targets,
            memory,
            loop,
            reward,
            progress=lambda items: tqdm(items, desc="score SFT targets"),
            replay=replay,
        )
        targets = [[plan] for plan in best]
    examples = []
    for record, plans in zip(records, targets, strict=True):
        examples.extend((prompt_for(record), plan) for plan in plans)
    variant_examples = len(examples) - len(states)
    skipped = 0
    if settings.skip_penalised_plans:
        reward = RewardSettings.from_params(params.get("reward"))
        clean = [
            (messages, target) for messages, target in examples if plan_is_clean(target, reward)
        ]
        skipped = len(examples) - len(clean)
        if not clean:
            raise ConfigError(
                f"training.sft.skip_penalised_plans: all {len(examples)} SFT targets earn a "
                "reward penalty; nothing is left to train on (turn the option off)"
            )
        examples = clean
    folder, log = run_sft(
        base.folder, examples, settings, params.get("torch_threads"), mlflow_step_logger()
    )
    report = {
        "enabled": True,
        "teacher": teacher,
        "examples": len(examples),
        "variant_examples": variant_examples,
        "target_choice": settings.target_choice,
        **({"best_reward": choice.as_dict()} if choice else {}),
        "skipped_penalised_plans": skipped,
        **log.summary(),
    }
    return PlannerModel(folder, {**metadata, "stage": "sft", "sft": report}), report


def _variant_planners(variant_targets: dict[str, Any]) -> list[Planner]:
    """Heuristic planners from ``training.sft.variant_targets``: a name for each, mapped to its
    settings (a mapping, so one variant can be set from the command line:
    ``--params=training.sft.variant_targets.one_query.keyword_intent=false``)."""
    section = "training.sft.variant_targets"
    if not isinstance(variant_targets, dict):
        raise ConfigError(
            f"{section} must map a name to heuristic planner settings, e.g. "
            f"{{one_query: {{keyword_intent: false}}}}, got {variant_targets!r}"
        )
    planners = []
    for name, variant in variant_targets.items():
        if not isinstance(variant, dict):
            raise ConfigError(
                f"{section}.{name} must be a mapping of heuristic planner settings "
                f"(e.g. {{keyword_intent: false}}), got {variant!r}"
            )
        try:
            planners.append(make_planner("heuristic", **variant))
        except ConfigError as exc:
            raise ConfigError(f"{section}.{name}: {exc}") from exc
    return planners


def filter_training_states(
    states: pd.DataFrame,
    sft_planners: PlannerModelStore,
    memory: MemoryIndex,
    questions: pd.DataFrame,
    params: dict[str, Any],
    loop_params: dict[str, Any],
) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame, dict[str, Any], dict[str, Any]]:
    """G samples of the planner GRPO starts from per state; keep states whose samples disagree."""
    start = _grpo_start(sft_planners, params)
    filtering = dict(params.get("filtering") or {})
    grpo = GRPOSettings.from_params(params.get("grpo"))
    prompt = planner_prompt_settings(params)
    prompt_for = record_prompt(prompt)
    sampler = PlannerSampler(
        start.folder,
        max_new_tokens=grpo.max_completion_length,
        temperature=float(filtering.get("temperature", grpo.temperature)),
        threads=params.get("torch_threads"),
        seed=int(filtering.get("seed", 0)),
    )

    def sample(record: PlannerStateRecord, n: int) -> list[str]:
        return sampler.sample(prompt_for(record), n)

    loop, reward, replay = _scoring(memory, questions, params, loop_params)
    retained, rollouts, report = filter_states(
        _records(states),
        sample,
        memory,
        loop,
        reward,
        group_size=int(filtering.get("group_size", grpo.num_generations))
        if filtering.get("enabled", True)
        else 0,
        max_states=filtering.get("max_states"),
        seed=int(filtering.get("seed", 0)),
        progress=lambda items: tqdm(items, desc="filter states (rollouts)"),
        prefer_teacher_short=bool(filtering.get("prefer_teacher_short", True)),
        later_round_share=_optional_float(filtering.get("later_round_share")),
        replay=replay,
        complement=prompt["complement"],
        drop_format_only=bool(filtering.get("drop_format_only", False)),
    )
    metrics = {
        f"filter.{key}": {"value": float(value), "step": 0}
        for key, value in report.as_dict().items()
        if isinstance(value, int | float) and value is not None
    }
    return (
        pd.DataFrame([asdict(r) for r in retained], columns=_record_columns()),
        pd.DataFrame(rollouts),
        pd.DataFrame(report.table()),
        report.as_dict(),
        metrics,
    )


def train_planner_grpo(
    retained_states: pd.DataFrame,
    sft_planners: PlannerModelStore,
    memory: MemoryIndex,
    questions: pd.DataFrame,
    params: dict[str, Any],
    loop_params: dict[str, Any],
) -> tuple[PlannerModel, dict[str, Any], dict[str, Any]]:
    start = _grpo_start(sft_planners, params)
    settings = GRPOSettings.from_params(params.get("grpo"))
    prompt = planner_prompt_settings(params)
    prompt_for = record_prompt(prompt)
    rows = [
        {
            "prompt": prompt_for(r),
            "memory_id": r.memory_id,
            "gold_turn_ids": r.gold_turn_ids,
            "viewed_turn_ids": r.viewed_turn_ids,
            "round_index": r.round_index,
            "question_id": r.question_id,
            # a complementing planner is scored with the heuristic's intents after its own
            "complement_plan": complement_column(r) if prompt["complement"] else "",
            # with reward.teacher_regret each sample is scored against the teacher's plan
            "teacher_plan": r.teacher_output,
        }
        for r in _records(retained_states)
    ]
    reward = RetrievalReward(memory, *_scoring(memory, questions, params, loop_params))
    continuation = _policy_continuation(reward, prompt)
    folder, log = run_grpo(
        start.folder,
        rows,
        reward,
        settings,
        params.get("torch_threads"),
        mlflow_step_logger(),
        on_policy=continuation and continuation.attach,
    )
    report = {
        "start": {"folder": str(start.folder), "version": start.version},
        "states": len(rows),
        "settings": asdict(settings),
        "completions_scored": reward.completions,
        "parse_failures": reward.parse_failures,
        "cut_off": reward.cut_off,
        "no_intent": reward.no_intent,
        "below_teacher": reward.below_teacher,
        **_continuation_summary(reward, continuation),
        **log.summary(),
        "reward_curve": log.curve("reward"),
        # the x of every rollout curve below: they are logged when completions are scored
        "scored_steps": log.steps_with("reward"),
        "reward_std_curve": log.curve("reward_std"),
        "recall_gained_curve": log.curve("recall_gained"),
        "parse_failure_curve": log.curve("parse_failure_rate"),
        "cut_off_curve": log.curve("cut_off_rate"),
        "no_intent_curve": log.curve("no_intent_rate"),
        "format_penalty_curve": log.curve("format_penalty"),
        "teacher_regret_curve": log.curve("teacher_regret"),
    }
    metadata = {
        **{k: v for k, v in start.metadata.items() if k not in ("version", "stage")},
        "stage": "grpo",
        "started_from": start.version,
        "start_stage": start.metadata.get("stage"),
        # the prompt GRPO trained with is the one evaluation must render (it may differ from
        # the start's, e.g. a draft plan added to an SFT planner trained without one)
        "prompt": prompt,
        # a start that was itself trained (on other memories, perhaps) passes its memories on
        "train_memory_ids": sorted(
            set(start.train_memory_ids) | {row["memory_id"] for row in rows}
        ),
        "grpo": {k: v for k, v in report.items() if not k.endswith("_curve")},
    }
    metrics = {
        "grpo.seconds_per_step": {"value": float(log.median_step_seconds or 0.0), "step": 0},
        "grpo.steps": {"value": float(log.steps), "step": 0},
    }
    return PlannerModel(folder, metadata), report, metrics


def _scoring(
    memory: MemoryIndex,
    questions: pd.DataFrame,
    params: dict[str, Any],
    loop_params: dict[str, Any],
) -> tuple[LoopSettings, RewardSettings, TrajectoryReplay | None]:
    """What scoring a plan at a state needs: the evaluation loop, the reward settings, and
    with ``training.reward.horizon: trajectory`` the replay of the training questions over
    the heuristic roles the states were collected with."""
    loop = LoopSettings.from_params(loop_params)
    reward = RewardSettings.from_params(params.get("reward"))
    if reward.horizon != "trajectory":
        return loop, reward, None
    replay = TrajectoryReplay(from_frame(questions, Question), memory, collection_roles(), loop)
    return loop, reward, replay


def _policy_continuation(
    reward: RetrievalReward, prompt: dict[str, Any]
) -> PolicyContinuation | None:
    """With ``training.reward.continuation: policy``, what hands the model GRPO trains to the
    replay that plays the rounds after each sampled plan."""
    if reward.replay is None or reward.reward.continuation != "policy":
        return None
    return PolicyContinuation(reward.replay, prompt)


def _continuation_summary(
    reward: RetrievalReward, continuation: PolicyContinuation | None
) -> dict[str, Any]:
    """With the trajectory reward, who played the rounds after the sampled plans, and how
    many such rounds there were (few: the reward is mostly the plan's own round's)."""
    if continuation is not None:
        return {"continuation": continuation.report()}
    if reward.replay is not None:
        return {"continuation": continuation_report(reward.replay)}
    return {}


def _grpo_start(sft_planners: PlannerModelStore, params: dict[str, Any]) -> PlannerModel:
    """``training.grpo_start``: the newest SFT planner by default, or a version of it, or any
    planner folder (a GRPO planner, to train it further). Filtering samples the same planner,
    so the retained states are those where the planner being trained disagrees with itself."""
    return resolve_planner(
        str(params.get("grpo_start", "latest")), sft_planners, "training.grpo_start"
    )


def _optional_float(value: Any) -> float | None:
    return None if value is None else float(value)


def _record_columns() -> list[str]:
    return [f.name for f in fields(PlannerStateRecord)]


def _records(frame: pd.DataFrame) -> list[PlannerStateRecord]:
    return from_frame(frame, PlannerStateRecord)


def _curve_steps(curve: list[float], scored_steps: list[int]) -> Sequence[int]:
    """The step of each point of a GRPO curve: the scored steps when the report has them for
    every point (with trl's num_iterations > 1 only every n-th step scores completions), else
    1, 2, 3, ... (reports from before the scored steps were kept)."""
    if len(scored_steps) == len(curve):
        return scored_steps
    return range(1, len(curve) + 1)


def plot_training(sft_report: dict[str, Any], grpo_report: dict[str, Any]) -> dict[str, Any]:
    """SFT loss and GRPO reward / recall gained / parse failures (and cut-off plans) by step."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(1, 3, figsize=(13, 3.6))
    loss = sft_report.get("loss_curve") or []
    axes[0].plot(range(1, len(loss) + 1), loss, marker=".")
    axes[0].set(title="SFT warm start", xlabel="step", ylabel="loss")
    reward = grpo_report.get("reward_curve") or []
    spread = grpo_report.get("reward_std_curve") or [0.0] * len(reward)
    scored = grpo_report.get("scored_steps") or []
    steps = _curve_steps(reward, scored)
    axes[1].plot(steps, reward, marker=".", label="reward (mean)")
    axes[1].fill_between(
        steps,
        [m - s for m, s in zip(reward, spread, strict=False)],
        [m + s for m, s in zip(reward, spread, strict=False)],
        alpha=0.2,
        label="± std within groups",
    )
    axes[1].set(title="GRPO reward", xlabel="step")
    axes[1].legend()
    for key, label in (
        ("recall_gained_curve", "missing evidence recovered"),
        ("parse_failure_curve", "parse failure rate"),
        ("cut_off_curve", "of which cut off"),
        ("no_intent_curve", "of which no intent"),
    ):
        part = grpo_report.get(key) or []
        # the cut-off and no-intent curves only when there were some (absent in older reports)
        if key in ("cut_off_curve", "no_intent_curve") and not any(part):
            continue
        axes[2].plot(_curve_steps(part, scored), part, marker=".", label=label)
    axes[2].set(title="GRPO rollouts", xlabel="step", ylim=(0, 1))
    axes[2].legend()
    for axis in axes:
        axis.grid(alpha=0.3)
    figure.tight_layout()
    return {"training_curves.png": figure}
