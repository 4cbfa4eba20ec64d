"""The MERA loop and the baselines on a small memory with a two-hop question."""

from __future__ import annotations

import pandas as pd
import pytest

from mera_pipelines.core.baselines import run_naive_rag
from mera_pipelines.core.errors import ConfigError
from mera_pipelines.core.evaluation import run_systems, score_runs, summarise
from mera_pipelines.core.loop import LoopSettings, Roles, run_mera
from mera_pipelines.core.memory import MemoryIndex, SearchSettings
from mera_pipelines.core.records import Question
from mera_pipelines.core.roles.answerer import make_answerer
from mera_pipelines.core.roles.planner import HeuristicPlanner
from mera_pipelines.core.roles.seeder import make_seeder
from mera_pipelines.core.roles.verifier import make_verifier
from tests.core.test_memory import fact_rows
from tests.support.embedding import HashingEmbedder

TURNS = {
    "D1:1": ["Maya met Jonas at the climbing gym last Saturday (2023-05-06)"],
    "D1:2": ["Maya bought new climbing shoes"],
    "D2:1": ["Jonas's dog Pepper is a vizsla", "Pepper loves the beach"],
    "D2:2": ["Maya's sister Lena lives in Lisbon"],
    "D3:1": ["Theo cooked pasta for dinner"],
    "D3:2": ["Theo's cat sleeps all day"],
}
QUESTION = Question(
    question_id="m/q0",
    memory_id="m",
    question="What breed is the dog of the friend Maya met at the climbing gym?",
    answer="vizsla",
    category="1",
    gold_turn_ids=["D1:1", "D2:1"],
)


@pytest.fixture(scope="module")
def memory(tmp_path_factory) -> MemoryIndex:
    index = MemoryIndex(str(tmp_path_factory.mktemp("db")), "facts", HashingEmbedder())
    index.upsert_facts(fact_rows("m", TURNS))
    return index


@pytest.fixture
def roles() -> Roles:
    return Roles(
        make_seeder("heuristic"),
        HeuristicPlanner(),
        make_verifier("heuristic"),
        make_answerer("heuristic"),
    )


def tight(**overrides) -> LoopSettings:
    """One new turn per round, so the second hop has to come from a later round."""
    values = dict(
        turns_first_round=1,
        turns_per_round=1,
        max_rounds=6,
        exhaustion_rounds=2,
        search=SearchSettings(k=1),
    )
    return LoopSettings(**{**values, **overrides})


def test_loop_records_every_round_and_finds_both_hops(memory, roles):
    trajectory = run_mera(QUESTION, memory, roles, tight())
    assert trajectory.rounds[0].retrieved_turn_ids == ["D1:1"]
    assert trajectory.rounds[-1].recall_retrieved == 1.0
    recalls = [r.recall_retrieved for r in trajectory.rounds]
    assert recalls == sorted(recalls)  # cumulative
    assert len(set(trajectory.viewed_turn_ids)) == len(trajectory.viewed_turn_ids)
    assert set(trajectory.accepted_turn_ids) <= set(trajectory.viewed_turn_ids)
    assert trajectory.termination in {"sufficient", "exhausted", "max_rounds"}
    assert trajectory.graph["nodes"]
    assert "planner" in trajectory.usage and "verifier" in trajectory.usage


def test_loop_stops_at_max_rounds(memory, roles):
    trajectory = run_mera(QUESTION, memory, roles, tight(max_rounds=1))
    assert len(trajectory.rounds) == 1 and trajectory.termination in {"max_rounds", "sufficient"}


def test_loop_reports_exhaustion_when_the_memory_has_nothing_left(tmp_path, roles):
    tiny = MemoryIndex(str(tmp_path / "db"), "facts", HashingEmbedder())
    tiny.upsert_facts(fact_rows("m", {"X:1": ["Theo cooked pasta"]}))
    trajectory = run_mera(QUESTION, tiny, roles, tight(max_rounds=8, min_rounds=8))
    assert trajectory.termination == "exhausted"
    assert len(trajectory.rounds) < 8


def test_state_hook_sees_every_planner_call(memory, roles):
    seen = []
    trajectory = run_mera(
        QUESTION,
        memory,
        roles,
        tight(),
        on_plan=lambda q, state, graph, viewed, accepted: seen.append(
            (state.round_index, list(viewed))
        ),
    )
    assert [r for r, _ in seen] == [r.round for r in trajectory.rounds]
    assert seen[0][1] == []


def test_naive_rag_views_exactly_k_turns(memory, roles):
    trajectory = run_naive_rag(QUESTION, memory, roles.answerer, k=2)
    assert len(trajectory.viewed_turn_ids) == 2
    assert trajectory.termination == "single_shot"


def test_systems_side_by_side_give_the_contract_metrics(memory, roles):
    settings = tight()
    runs, notes = run_systems(
        [QUESTION], [], memory, roles, settings, ["mera", "naive_rag", "flat", "full_text"]
    )
    assert set(runs) == {"mera", "flat", "naive_rag"}
    assert any("full_text skipped" in n for n in notes)
    mera_viewed = len(runs["mera"].trajectories[0].viewed_turn_ids)
    assert len(runs["naive_rag"].trajectories[0].viewed_turn_ids) == mera_viewed
    rows = score_runs(runs, [QUESTION], "locomo", None, settings.max_rounds)
    summary = summarise(rows, runs, {"path": "x", "format": "locomo"}, {}, None, notes)
    metrics = summary["systems"]["mera"]
    for key in (
        "n_questions",
        "f1",
        "accuracy",
        "judge",
        "evidence_recall_by_round",
        "round1_recall",
        "evidence_recall_final",
        "accepted_recall_final",
        "mean_rounds",
        "mean_turns_viewed",
        "termination",
        "by_category",
        "tokens_online_per_question",
        "seconds_per_question",
    ):
        assert key in metrics
    assert metrics["accuracy"] is None and metrics["evidence_recall_final"] == 1.0
    assert pd.isna(metrics["f1"]) is False


def test_systems_refuse_questions_of_a_memory_that_is_not_built(memory, roles):
    elsewhere = Question("other/q0", "other", "Who is Maya?", "a climber", "1", ["D1:1"])
    with pytest.raises(ConfigError, match=r"no facts for memories \['other'\]"):
        run_systems([QUESTION, elsewhere], [], memory, roles, tight(), ["mera"])


def test_loop_settings_name_an_unknown_key_and_read_retrieval():
    settings = LoopSettings.from_params({"max_rounds": 2, "retrieval": {}})
    assert settings.max_rounds == 2 and settings.search == SearchSettings()
    with pytest.raises(
        ConfigError, match=r"Unknown loop settings \['min_round'\]; known: .*min_rounds"
    ):
        LoopSettings.from_params({"min_round": 2})
