"""Which rows of the train pipeline's tables hold a forgotten memory or turn.

Tables are told apart by their columns, not their names, so a table added to
``forget_training_tables`` is handled by what it holds:

- a *question table* (``question_id`` and ``memory_id``, no ``state_id``: synthetic_questions):
  a question was written from its gold turns' facts, so it quotes them;
- a *state table* (``state_id`` and ``memory_id``: planner_states, training_states): a state
  quotes its question (written from the gold turns) and, in its graph, anchors, query history
  and new evidence, only what the verifier saw: the turns in ``viewed_turn_ids``
  (``found_turn_ids`` is a subset of both);
- a *rollout table* (``state_id``, no ``memory_id``: rollouts): a completion was sampled from
  its state's prompt, so it goes with its state. Its memory is found through the state tables,
  else through the question tables (``state_id`` is ``<question_id>#<round>``), else through
  the synthetic question id ``syn-<memory_id>-<n>`` (core/training/synthesis.py).

Forgetting a memory drops all its rows. Forgetting turn T of memory M drops M's rows that
contain T: questions whose gold evidence includes T, states whose gold or viewed turns include
T or whose question was dropped, and the rollouts of dropped states. A table of M's rows with
neither a gold nor a viewed column cannot show what a row contains: all M's rows go. A
rollout whose state is in no state table cannot be checked either: it goes when it belongs to M.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

import pandas as pd

from mera_pipelines.core.errors import ConfigError

TURN_COLUMNS = ("gold_turn_ids", "viewed_turn_ids", "found_turn_ids")
_SYNTHETIC_QUESTION_ID = re.compile(r"^syn-(?P<memory_id>.+)-\d+$")


def drop_masks(
    tables: dict[str, pd.DataFrame], memory_id: str, turn_id: str | None
) -> dict[str, pd.Series]:
    """For each table, True where the row holds the memory (or the turn)."""
    kinds = {name: _kind(name, frame) for name, frame in tables.items()}
    masks: dict[str, pd.Series] = {}
    dropped_questions: set[str] = set()
    for name in _named(kinds, "question"):
        masks[name] = _memory_rows(tables[name], memory_id, turn_id, set())
        if "question_id" in tables[name].columns:
            dropped_questions |= set(tables[name].loc[masks[name], "question_id"])
    dropped_states: set[str] = set()
    state_memory: dict[str, str] = {}
    for name in _named(kinds, "state"):
        frame = tables[name]
        masks[name] = _memory_rows(frame, memory_id, turn_id, dropped_questions)
        dropped_states |= set(frame.loc[masks[name], "state_id"])
        state_memory.update(zip(frame["state_id"], frame["memory_id"], strict=True))
    question_memory = {
        question: memory
        for name in _named(kinds, "question")
        if "question_id" in tables[name].columns
        for question, memory in zip(
            tables[name]["question_id"], tables[name]["memory_id"], strict=True
        )
    }

    def rollout_dropped(state_id: str) -> bool:
        if state_id in state_memory:  # a known state: dropped with it, or kept with it
            return state_id in dropped_states
        return _memory_of_state(state_id, question_memory) == memory_id  # cannot check it

    for name in _named(kinds, "rollout"):
        masks[name] = tables[name]["state_id"].map(rollout_dropped).astype(bool)
    return masks


def holds_target(tables: dict[str, pd.DataFrame], memory_id: str, turn_id: str | None) -> bool:
    """Whether some row is known to hold the memory (or the turn). A rollout whose state is in
    no state table is dropped for any turn of its memory, unchecked: it proves no turn exists."""
    masks = drop_masks(tables, memory_id, turn_id)
    return any(
        mask.any()
        for name, mask in masks.items()
        if turn_id is None or _kind(name, tables[name]) != "rollout"
    )


def _kind(name: str, frame: pd.DataFrame) -> str:
    columns = set(frame.columns)
    if {"state_id", "memory_id"} <= columns:
        return "state"
    if {"question_id", "memory_id"} <= columns:
        return "question"
    if "memory_id" in columns:
        return "memory"
    if "state_id" in columns:
        return "rollout"
    raise ConfigError(
        f"Training table '{name}' has neither a memory_id nor a state_id column, so forget "
        "cannot tell which rows hold the memory; remove it from forget_training_tables"
    )


def _named(kinds: dict[str, str], kind: str) -> list[str]:
    # tables with only a memory_id column are filtered like questions (by memory and turns)
    wanted = {kind, "memory"} if kind == "question" else {kind}
    return [name for name, table_kind in kinds.items() if table_kind in wanted]


def _memory_rows(
    frame: pd.DataFrame, memory_id: str, turn_id: str | None, dropped_questions: set[str]
) -> pd.Series:
    of_memory = frame["memory_id"] == memory_id
    turn_columns = [c for c in TURN_COLUMNS if c in frame.columns]
    if turn_id is None or not turn_columns:
        return of_memory
    quotes = pd.Series(False, index=frame.index)
    for column in turn_columns:
        quotes |= frame[column].map(lambda ids: turn_id in _ids(ids))
    if "question_id" in frame.columns and dropped_questions:
        quotes |= frame["question_id"].isin(dropped_questions)
    return of_memory & quotes


def _ids(value: Iterable[str] | None) -> list[str]:
    # parquet gives list columns back as numpy arrays (or None for a null)
    return [] if value is None else list(value)


def _memory_of_state(state_id: str, question_memory: dict[str, str]) -> str | None:
    question_id = state_id.rsplit("#", 1)[0]
    if question_id in question_memory:
        return question_memory[question_id]
    match = _SYNTHETIC_QUESTION_ID.match(question_id)
    return match["memory_id"] if match else None
