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
  forget those too (see docs/reliability.md).
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from mera_pipelines.core.errors import ConfigError
from mera_pipelines.core.llm.cache import ResponseCache
from mera_pipelines.core.memory import MemoryIndex


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


def forget_rows(
    conversations: pd.DataFrame,
    turns: pd.DataFrame,
    questions: pd.DataFrame,
    facts: pd.DataFrame,
    params: dict[str, Any],
) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame, pd.DataFrame, dict[str, int]]:
    """The tables without the memory (or the turn); counts of the rows removed."""
    memory_id, turn_id = forget_target(params)
    before = (conversations, turns, questions, facts)
    in_memory = turns["memory_id"] == memory_id
    if not in_memory.any():
        raise ConfigError(f"Parameter 'forget.memory_id': no turn has memory_id {memory_id!r}")
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
        if not the_turn.any():
            raise ConfigError(
                f"Parameter 'forget.turn_id': memory {memory_id!r} has no turn {turn_id!r}"
            )
        questions, edited_questions = _without_evidence(questions, memory_id, turn_id)
        conversations = conversations.copy()
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


def forget_in_index_and_cache(
    memory_index: MemoryIndex, llm_cache: ResponseCache, params: dict[str, Any]
) -> dict[str, int]:
    """Purge the facts from the LanceDB table and the memory's replies from the LLM cache."""
    memory_id, turn_id = forget_target(params)
    removed = memory_index.purge(memory_id, turn_id)
    report = {
        "index_rows_removed": removed,
        "index_versions_kept": memory_index.version_count(),
        "cached_replies_removed": llm_cache.delete_tag(memory_id),
    }
    memory_index.close()
    llm_cache.close()
    return report


def forget_report(
    table_counts: dict[str, int], index_counts: dict[str, int], params: dict[str, Any]
) -> tuple[dict[str, Any], dict[str, Any]]:
    memory_id, turn_id = forget_target(params)
    report = {"memory_id": memory_id, "turn_id": turn_id, **table_counts, **index_counts}
    metrics = {
        key: {"value": float(value), "step": 0}
        for key, value in {**table_counts, **index_counts}.items()
    }
    return report, metrics
