"""Forgetting: ``kedro run --pipeline=forget --params="forget.memory_id=M[,forget.turn_id=T]"``.

- the memory index: the facts are removed, the table rewritten and its old versions deleted,
  so the bytes are gone (``MemoryIndex.purge``);
- the LLM response cache: every reply tagged with the memory (the memory id is the cache tag of
  every role's calls). For one turn this is still the whole memory's replies: the next turn's
  extraction prompt quotes the turn as context, and the evaluation prompts quote retrieved
  turns, so no narrower set is known to be free of it. They are recomputed on the next run;
- the derived tables (conversations, turns, questions, facts): their latest versions without
  the memory's rows (or the turn's rows; the turn leaves questions' gold evidence), saved as
  new versions. Older versions are kept, as versioning promises; delete their folders to
  forget those too (see docs/reliability.md);
- the train pipeline's tables (``forget_training_tables``: synthetic questions, planner
  states, training states, rollouts) that exist: new versions without the rows that hold the
  memory or the turn (``training_rows``);
- trained planners: a model cannot be un-trained, so the versions trained on the memory are
  reported, and with ``forget.planners=delete`` their folders are deleted.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

import pandas as pd

from mera_pipelines.core.errors import ConfigError
from mera_pipelines.core.llm.cache import ResponseCache
from mera_pipelines.core.memory import MemoryIndex
from mera_pipelines.core.training.model_store import PlannerModel, PlannerModelStore
from mera_pipelines.pipelines.forget.training_rows import drop_masks, holds_target

logger = logging.getLogger(__name__)

PLANNER_MODES = ("report", "delete")


@dataclass(frozen=True)
class ForgetTarget:
    """What to forget, checked against the data (``check_forget_target``)."""

    memory_id: str
    turn_id: str | None = None
    planners: str = "report"  # trained planners: "report" them, or "delete" their folders


def forget_target(params: dict[str, Any]) -> tuple[str, str | None]:
    memory_id = params.get("memory_id")
    turn_id = params.get("turn_id")
    if not isinstance(memory_id, str) or not memory_id.strip():
        raise ConfigError(
            "The forget pipeline needs the memory to forget: "
            'kedro run --pipeline=forget --params="forget.memory_id=<id>[,forget.turn_id=<id>]"'
        )
    if turn_id is not None and (not isinstance(turn_id, str) or not turn_id.strip()):
        raise ConfigError(f"Parameter 'forget.turn_id' must be a turn id string, got {turn_id!r}")
    return memory_id, turn_id


def planners_mode(params: dict[str, Any]) -> str:
    mode = params.get("planners", "report")
    if mode not in PLANNER_MODES:
        raise ConfigError(
            f"Parameter 'forget.planners' must be one of {list(PLANNER_MODES)}, got {mode!r}"
        )
    return mode


def check_forget_target(
    turns: pd.DataFrame,
    training_tables: dict[str, pd.DataFrame],
    sft_planners: PlannerModelStore,
    trained_planners: PlannerModelStore,
    params: dict[str, Any],
) -> ForgetTarget:
    """The target, once something holds it: the turns table, a training table, or (when they
    are to be deleted) a planner trained on the memory. A rerun after a report-only forget, to
    delete the planners, finds only those. A target found nowhere is a typo: nothing is touched
    (a turn's forget would still drop the whole memory's cached replies)."""
    memory_id, turn_id = forget_target(params)
    target = ForgetTarget(memory_id, turn_id, planners_mode(params))
    in_memory = turns["memory_id"] == memory_id
    if turn_id is not None:
        in_memory &= turns["turn_id"] == turn_id
    found = bool(in_memory.any()) or holds_target(training_tables, memory_id, turn_id)
    if not found and target.planners == "delete":
        found = bool(planners_trained_on(memory_id, sft_planners, trained_planners))
    if found:
        return target
    if turn_id is None:
        raise ConfigError(
            f"Parameter 'forget.memory_id': no turn, training table or planner to delete "
            f"has memory_id {memory_id!r}"
        )
    raise ConfigError(
        f"Parameter 'forget.turn_id': memory {memory_id!r} has no turn {turn_id!r} "
        "(in the turns or training tables)"
    )


def forget_rows(
    conversations: pd.DataFrame,
    turns: pd.DataFrame,
    questions: pd.DataFrame,
    facts: pd.DataFrame,
    target: ForgetTarget,
) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame, pd.DataFrame, dict[str, int]]:
    """The tables without the memory (or the turn); counts of the rows removed. A target
    already gone from them (a rerun) removes nothing."""
    memory_id, turn_id = target.memory_id, target.turn_id
    before = (conversations, turns, questions, facts)
    in_memory = turns["memory_id"] == memory_id
    if turn_id is None:
        kept = (
            conversations[conversations["memory_id"] != memory_id],
            turns[~in_memory],
            questions[questions["memory_id"] != memory_id],
            facts[facts["memory_id"] != memory_id],
        )
        edited_questions = 0
    else:
        the_turn = in_memory & (turns["turn_id"] == turn_id)
        questions, edited_questions = _without_evidence(questions, memory_id, turn_id)
        conversations = conversations.copy()
        if the_turn.any():
            conversations.loc[conversations["memory_id"] == memory_id, "n_turns"] -= 1
        kept = (
            conversations,
            turns[~the_turn],
            questions,
            facts[~((facts["memory_id"] == memory_id) & (facts["turn_id"] == turn_id))],
        )
    counts = {
        f"{name}_removed": len(old) - len(new)
        for name, old, new in zip(
            ("conversations", "turns", "questions", "facts"), before, kept, strict=True
        )
    }
    counts["questions_evidence_edited"] = edited_questions
    tables = tuple(table.reset_index(drop=True) for table in kept)
    return (*tables, counts)


def _without_evidence(
    questions: pd.DataFrame, memory_id: str, turn_id: str
) -> tuple[pd.DataFrame, int]:
    questions = questions.copy()
    edited = 0
    gold = []
    for memory, turn_ids in zip(questions["memory_id"], questions["gold_turn_ids"], strict=True):
        ids = list(turn_ids)
        if memory == memory_id and turn_id in ids:
            ids.remove(turn_id)
            edited += 1
        gold.append(ids)
    questions["gold_turn_ids"] = gold
    return questions, edited


def forget_training_rows(
    tables: dict[str, pd.DataFrame], target: ForgetTarget
) -> tuple[dict[str, pd.DataFrame], dict[str, int]]:
    """The train pipeline's tables that held the memory (or the turn), without those rows,
    and ``<table>_removed`` for every table that exists. Only changed tables are returned, so
    only they get a new version; a table never written has no count."""
    masks = drop_masks(tables, target.memory_id, target.turn_id)
    counts = {f"{name}_removed": int(masks[name].sum()) for name in tables}
    kept = {
        name: frame[~masks[name]].reset_index(drop=True)
        for name, frame in tables.items()
        if masks[name].any()
    }
    return kept, counts


def planners_trained_on(memory_id: str, *stores: PlannerModelStore) -> list[PlannerModel]:
    return [model for store in stores for model in store.trained_on(memory_id)]


def forget_planners(
    sft_planners: PlannerModelStore, trained_planners: PlannerModelStore, target: ForgetTarget
) -> dict[str, Any]:
    """The planner versions trained on the memory (a turn's too: the metadata names memories,
    not turns); with ``forget.planners=delete`` their folders are deleted."""
    found = [
        (store, model)
        for store in (sft_planners, trained_planners)
        for model in store.trained_on(target.memory_id)
    ]
    folders = [str(model.folder) for _, model in found]
    deleted: list[str] = []
    if target.planners == "delete":
        deleted = [str(store.delete(model.version)) for store, model in found]
    elif folders:
        logger.warning(
            "Planners trained on memory %r are kept (forget.planners=report): %s. A model "
            "cannot be un-trained; delete them with forget.planners=delete, or retrain "
            "without the memory.",
            target.memory_id,
            folders,
        )
    return {"planners_trained_on_memory": folders, "planners_deleted": deleted}


def forget_in_index_and_cache(
    memory_index: MemoryIndex, llm_cache: ResponseCache, target: ForgetTarget
) -> dict[str, int]:
    """Purge the facts from the LanceDB table and the memory's replies from the LLM cache."""
    removed = memory_index.purge(target.memory_id, target.turn_id)
    report = {
        "index_rows_removed": removed,
        "index_versions_kept": memory_index.version_count(),
        "cached_replies_removed": llm_cache.delete_tag(target.memory_id),
    }
    memory_index.close()
    llm_cache.close()
    return report


def forget_report(
    target: ForgetTarget, *counts: dict[str, Any]
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The report, and one MLflow metric per count (the length of a list of folders)."""
    merged = {key: value for part in counts for key, value in part.items()}
    report = {
        "memory_id": target.memory_id,
        "turn_id": target.turn_id,
        "planners": target.planners,
        **merged,
    }
    metrics = {
        key: {"value": float(len(value) if isinstance(value, list) else value), "step": 0}
        for key, value in merged.items()
    }
    return report, metrics
