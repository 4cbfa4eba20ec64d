"""Baselines that read the same memory as MERA.

- ``naive_rag``: one query (the question), top-k parent turns through the *same* retriever
  settings as MERA; k is matched to MERA's mean turns viewed by the caller, so a gain is the
  loop's, not the retriever's.
- ``full_text``: the whole history to the answer model (only meaningful with an LLM).
"""

from __future__ import annotations

import time
from dataclasses import replace

from mera_pipelines.core.memory import MemoryIndex, SearchSettings, TurnCandidate
from mera_pipelines.core.records import Intent, Question, RoleUsage, RoundLog, Trajectory, Turn
from mera_pipelines.core.roles.answerer import Answerer


def run_naive_rag(
    question: Question,
    memory: MemoryIndex,
    answerer: Answerer,
    k: int,
    search: SearchSettings | None = None,
) -> Trajectory:
    started = time.perf_counter()
    settings = replace(search or SearchSettings(), k=k)
    candidates = memory.search([question.question], question.memory_id, settings)[:k]
    gold = set(question.gold_turn_ids)
    viewed = [c.turn_id for c in candidates]
    recall = len(gold & set(viewed)) / len(gold) if gold else None
    answer = answerer.answer(question, "", candidates, False)
    usage = {"answerer": RoleUsage(answer.tokens_in, answer.tokens_out, 1, int(bool(answer.error)))}
    log = RoundLog(
        round=1,
        intents=[Intent(question.question)],
        queries=[question.question],
        retrieved_turn_ids=viewed,
        accepted_turn_ids=viewed,  # no verifier: everything retrieved goes to the answerer
        graph_nodes=0,
        graph_relations=0,
        sufficient=True,
        recall_retrieved=recall,
        recall_accepted=recall,
        usage=usage,
        seconds=time.perf_counter() - started,
    )
    return Trajectory(
        question_id=question.question_id,
        memory_id=question.memory_id,
        system="naive_rag",
        rounds=[log],
        termination="single_shot",
        answer=answer.answer,
        viewed_turn_ids=viewed,
        accepted_turn_ids=viewed,
        usage=usage,
        seconds=time.perf_counter() - started,
    )


def history_as_candidates(turns: list[Turn]) -> list[TurnCandidate]:
    """Every turn of a memory as an evidence record, in time order (for ``full_text``)."""
    ordered = sorted(turns, key=lambda t: (t.session_index, t.turn_index))
    return [
        TurnCandidate(
            memory_id=t.memory_id,
            turn_id=t.turn_id,
            speaker=t.speaker,
            timestamp=t.session_time,
            facts=[t.text]
            + ([f"[shared a photo of {t.image_caption}]"] if t.image_caption else []),
            score=1.0,
        )
        for t in ordered
    ]


def run_full_text(question: Question, turns: list[Turn], answerer: Answerer) -> Trajectory:
    started = time.perf_counter()
    history = history_as_candidates(turns)
    answer = answerer.answer(question, "", history, False)
    usage = {"answerer": RoleUsage(answer.tokens_in, answer.tokens_out, 1, int(bool(answer.error)))}
    viewed = [c.turn_id for c in history]
    return Trajectory(
        question_id=question.question_id,
        memory_id=question.memory_id,
        system="full_text",
        rounds=[],
        termination="single_shot",
        answer=answer.answer,
        viewed_turn_ids=viewed,
        accepted_turn_ids=viewed,
        usage=usage,
        seconds=time.perf_counter() - started,
    )
