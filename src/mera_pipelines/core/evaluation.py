"""Evaluate systems side by side on the same memory: run, score, summarise.

Plain Python (no Kedro): the evaluate pipeline's nodes are thin wrappers over these functions.
"""

from __future__ import annotations

import logging
import math
from dataclasses import asdict, dataclass, field
from typing import Any

from mera_pipelines.core.baselines import run_full_text, run_naive_rag
from mera_pipelines.core.errors import ConfigError
from mera_pipelines.core.llm import LLMBackend
from mera_pipelines.core.llm.concurrency import ItemFailure, map_bounded
from mera_pipelines.core.llm.factory import make_backend
from mera_pipelines.core.loop import LoopSettings, Roles, run_mera
from mera_pipelines.core.memory import MemoryIndex
from mera_pipelines.core.metrics import (
    QuestionResult,
    aggregate_system,
    answer_f1,
    question_result,
)
from mera_pipelines.core.records import Question, Trajectory, Turn
from mera_pipelines.core.roles.answerer import make_answerer
from mera_pipelines.core.roles.judge import Judge
from mera_pipelines.core.roles.planner import make_planner
from mera_pipelines.core.roles.seeder import make_seeder
from mera_pipelines.core.roles.verifier import make_verifier
from mera_pipelines.core.training.model_store import PlannerModel

logger = logging.getLogger(__name__)

SYSTEMS = ("mera", "naive_rag", "flat", "full_text")
RECALL_NOTE = (
    "Evidence recall averages cover questions with gold evidence only; LoCoMo category 5 "
    "(adversarial) and LongMemEval _abs (abstention) questions are scored for their answers "
    "but excluded from recall, since they have no answer-bearing evidence."
)


@dataclass
class RoleBackends:
    """The LLM backend of each role; None means the role's offline heuristic."""

    seeder: LLMBackend | None = None
    planner: LLMBackend | None = None
    verifier: LLMBackend | None = None
    answerer: LLMBackend | None = None
    judge: LLMBackend | None = None

    def describe(self) -> dict[str, Any]:
        out = {}
        for role, backend in vars(self).items():
            if backend is None:
                out[role] = {"kind": "heuristic"}
            else:
                describe = getattr(backend, "describe", None)
                out[role] = describe() if describe else {"model": backend.model_name}
        return out


@dataclass
class SystemRun:
    system: str
    trajectories: list[Trajectory] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)  # "question_id: reason"


def select_questions(questions: list[Question], params: dict[str, Any]) -> list[Question]:
    """Filter by memory and category and cap the count (a fixed order: as ingested)."""
    memories = params.get("memories")
    if isinstance(memories, str):
        memories = [m.strip() for m in memories.split(",") if m.strip()]
    if memories:
        known = {q.memory_id for q in questions}
        unknown = sorted(set(map(str, memories)) - known)
        if unknown:
            raise ConfigError(
                f"evaluation.memories names {unknown}, which have no questions; "
                f"known: {sorted(known)}"
            )
        questions = [q for q in questions if q.memory_id in set(map(str, memories))]
    categories = params.get("categories")
    if categories:
        wanted = {str(c) for c in categories}
        questions = [q for q in questions if str(q.category) in wanted]
    limit = params.get("max_questions")
    if limit:
        questions = spread_sample(questions, int(limit))
    return questions


def spread_sample(items: list, limit: int) -> list:
    """Every n-th item, so a sample covers all memories rather than the first one only."""
    if limit >= len(items):
        return items
    step = len(items) / limit
    return [items[math.floor(i * step)] for i in range(limit)]


def build_roles(
    kinds: dict[str, str], backends: RoleBackends, role_params: dict[str, Any]
) -> Roles:
    def params(role: str) -> dict[str, Any]:
        return dict(role_params.get(role) or {})

    return Roles(
        seeder=make_seeder(
            kinds.get("seeder", "heuristic"), backend=backends.seeder, **params("seeder")
        ),
        planner=make_planner(
            kinds.get("planner", "heuristic"), backend=backends.planner, **params("planner")
        ),
        verifier=make_verifier(
            kinds.get("verifier", "heuristic"), backend=backends.verifier, **params("verifier")
        ),
        answerer=make_answerer(
            kinds.get("answerer", "heuristic"), backend=backends.answerer, **params("answerer")
        ),
    )


def use_trained_planner(
    model: PlannerModel,
    backend_params: dict[str, Any],
    kinds: dict[str, str],
    role_params: dict[str, dict[str, Any]],
) -> LLMBackend:
    """A local backend for a trained planner folder; sets the planner role to ``llm`` in
    ``kinds`` and applies the prompt settings it was trained with (unless set explicitly)."""
    backend_params = dict(backend_params)
    cache_dir = backend_params.pop("cache_dir", None)
    backend = make_backend(
        {"kind": "transformers", "path": str(model.folder), **backend_params},
        cache_dir=cache_dir,
        setting="evaluation.planner_model_backend",
    )
    kinds["planner"] = "llm"
    prompt = model.prompt_settings
    planner_params = role_params.setdefault("planner", {})
    planner_params.setdefault("graph_chars", prompt.get("graph_chars"))
    for option in ("draft", "complement", "hints"):  # planners trained before them have no such key
        if prompt.get(option):
            planner_params.setdefault(option, True)
    if prompt.get("max_tokens"):
        planner_params.setdefault("max_tokens", int(prompt["max_tokens"]))
    return backend


def run_systems(
    questions: list[Question],
    turns: list[Turn],
    memory: MemoryIndex,
    roles: Roles,
    settings: LoopSettings,
    systems: list[str],
    naive_k: int | str = "match",
    concurrency: int = 1,
    answerer_is_llm: bool = False,
) -> tuple[dict[str, SystemRun], list[str]]:
    """Run each requested system over the questions; returns runs and notes for the report."""
    unknown = sorted(set(systems) - set(SYSTEMS))
    if unknown:
        raise ConfigError(f"Unknown systems {unknown} in evaluation.systems; known: {SYSTEMS}")
    memory.require_memories({q.memory_id for q in questions})
    notes: list[str] = []
    runs: dict[str, SystemRun] = {}
    flat_settings = LoopSettings(**{**asdict_shallow(settings), "use_graph": False})
    runners = {
        "mera": lambda q: run_mera(q, memory, roles, settings, system="mera"),
        "flat": lambda q: run_mera(q, memory, roles, flat_settings, system="flat"),
    }
    for system in [s for s in SYSTEMS if s in systems and s in runners]:
        runs[system] = _run_all(system, questions, runners[system], concurrency)
    if "naive_rag" in systems:
        k = _naive_k(naive_k, runs.get("mera"), settings)
        notes.append(
            f"naive_rag: one query (the question), top {k} parent turns, same retriever "
            f"settings as mera (k matched to mera's mean turns viewed)"
        )
        runs["naive_rag"] = _run_all(
            "naive_rag",
            questions,
            lambda q: run_naive_rag(q, memory, roles.answerer, k, settings.search),
            concurrency,
        )
    if "full_text" in systems:
        if answerer_is_llm:
            by_memory: dict[str, list[Turn]] = {}
            for turn in turns:
                by_memory.setdefault(turn.memory_id, []).append(turn)
            runs["full_text"] = _run_all(
                "full_text",
                questions,
                lambda q: run_full_text(q, by_memory.get(q.memory_id, []), roles.answerer),
                concurrency,
            )
        else:
            notes.append(
                "full_text skipped: it needs an LLM answerer (whole history in the "
                "prompt); the heuristic answerer would only measure extractive search"
            )
    return runs, notes


def asdict_shallow(settings: LoopSettings) -> dict[str, Any]:
    return {name: getattr(settings, name) for name in settings.__dataclass_fields__}


def _naive_k(naive_k: int | str, mera: SystemRun | None, settings: LoopSettings) -> int:
    if naive_k != "match":
        return int(naive_k)
    if mera is None or not mera.trajectories:
        return settings.turns_first_round
    viewed = [len(t.viewed_turn_ids) for t in mera.trajectories]
    return max(1, round(sum(viewed) / len(viewed)))


def _run_all(system: str, questions: list[Question], runner, concurrency: int) -> SystemRun:
    results = map_bounded(runner, questions, concurrency=concurrency, desc=f"evaluate {system}")
    run = SystemRun(system)
    for question, result in zip(questions, results, strict=True):
        if isinstance(result, ItemFailure):
            run.failures.append(f"{question.question_id}: {result.message}")
            logger.error("%s failed on %s: %s", system, question.question_id, result.message)
        else:
            run.trajectories.append(result)
    return run


def score_runs(
    runs: dict[str, SystemRun],
    questions: list[Question],
    dataset: str,
    judge: Judge | None,
    max_rounds: int,
    concurrency: int = 1,
) -> list[QuestionResult]:
    by_id = {q.question_id: q for q in questions}
    rows: list[QuestionResult] = []
    for run in runs.values():

        def score(trajectory: Trajectory) -> QuestionResult:
            question = by_id[trajectory.question_id]
            f1 = answer_f1(
                trajectory.answer,
                question.answer,
                question.category,
                dataset,
                is_abstention=question.is_abstention,
            )
            verdict = judge.judge(question, trajectory.answer) if judge is not None else None
            return question_result(
                question,
                trajectory,
                f1,
                verdict.correct if verdict else None,
                judge_label=verdict.label if verdict else None,
                judge_error=verdict.error if verdict else None,
                max_rounds=max_rounds,
            )

        for result in map_bounded(
            score,
            run.trajectories,
            concurrency=concurrency,
            desc=f"score {run.system}",
            progress=judge is not None,
        ):
            if isinstance(result, ItemFailure):
                run.failures.append(f"scoring {result.item_repr}: {result.message}")
            else:
                rows.append(result)
    return rows


def summarise(
    rows: list[QuestionResult],
    runs: dict[str, SystemRun],
    source: dict[str, Any],
    backends: dict[str, Any],
    judge_name: str | None,
    notes: list[str],
) -> dict[str, Any]:
    systems = {}
    for system, run in runs.items():
        metrics = aggregate_system([r for r in rows if r.system == system], judge=judge_name)
        metrics["failed_questions"] = run.failures
        systems[system] = metrics
    return {
        "source": source,
        "backend": backends,
        "scoring": {
            "f1": "token F1 with LoCoMo's official normalisation and category rules",
            "accuracy": f"LLM judge {judge_name}"
            if judge_name
            else "null: no LLM judge configured (heuristic token F1 only, not an accuracy)",
        },
        "recall_note": RECALL_NOTE,
        "notes": notes,
        "systems": systems,
    }


def trajectory_record(trajectory: Trajectory) -> dict[str, Any]:
    return asdict(trajectory)
