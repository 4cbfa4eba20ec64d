"""The SFT teacher: the heuristic planner by default, an LLM planner over any backend when
configured. The teacher plans the trajectories its states are recorded on, its plan for each
state is the SFT target, and its failures are counted, never hidden."""

from __future__ import annotations

import json

import pytest

from mera_pipelines.core.errors import LLMCallError
from mera_pipelines.core.llm.factory import make_backend
from mera_pipelines.core.loop import LoopSettings
from mera_pipelines.core.records import Intent, Question, to_frame
from mera_pipelines.core.roles.planner import HeuristicPlanner, PlannerState, PlanResult
from mera_pipelines.core.training.states import collect_states
from mera_pipelines.pipelines.collect.nodes import collect_planner_states
from tests.core.test_loop import QUESTION, memory, roles  # noqa: F401 (fixtures)
from tests.support.openai_stub import Reply, stub_server  # noqa: F401 (fixture)

LOOP = LoopSettings(turns_first_round=1, turns_per_round=1, max_rounds=3, exhaustion_rounds=3)


class ScriptedTeacher:
    """Plans one query per round, numbered; fails (as LLMPlanner does) in the rounds listed."""

    name = "scripted"

    def __init__(self, failing_rounds: tuple[int, ...] = ()) -> None:
        self.failing_rounds = failing_rounds
        self.states: list[PlannerState] = []

    def plan(self, state: PlannerState) -> PlanResult:
        self.states.append(state)
        query = f"Jonas dog breed vizsla round {state.round_index}"
        if state.round_index in self.failing_rounds:
            fallback = HeuristicPlanner().plan(state)
            fallback.parse_failed, fallback.error = True, "no JSON in the reply"
            return fallback
        return PlanResult([Intent(query, ["Jonas"], [])], tokens_in=50, tokens_out=9)


def test_the_teacher_plans_the_trajectory_and_its_plan_is_the_sft_target(memory, roles):
    teacher = ScriptedTeacher()
    records, report = collect_states([QUESTION], memory, roles, LOOP, teacher)
    assert len(records) == len(teacher.states) >= 2  # one call per state, not two
    for record in records:
        intents = json.loads(record.teacher_output)["intents"]
        assert intents[0]["desired_fact"].endswith(f"round {record.round_index}")
    # the loop searched with the teacher's plan: round 2 sees round 1's teacher query
    assert records[1].query_history[0].startswith("Jonas dog breed vizsla round 1")
    assert report.teacher == "scripted" and report.teacher_calls == len(records)
    assert (report.teacher_tokens_in, report.teacher_tokens_out) == (
        50 * len(records),
        9 * len(records),
    )
    assert report.teacher_parse_failures == 0 and report.teacher_failure_examples == []


def test_a_failed_teacher_call_is_counted_and_the_fallback_plan_kept(memory, roles):
    records, report = collect_states([QUESTION], memory, roles, LOOP, ScriptedTeacher((2,)))
    assert report.teacher_parse_failures == 1
    assert report.teacher_failure_examples == ["m/q0#2: no JSON in the reply"]
    second = next(r for r in records if r.round_index == 2)
    fallback = HeuristicPlanner().plan(second.planner_state()).intents
    assert json.loads(second.teacher_output)["intents"][0]["desired_fact"] == (
        fallback[0].desired_fact
    )


def test_a_teacher_that_never_answers_usably_stops_the_collection(memory, roles):
    with pytest.raises(LLMCallError, match="teacher planner 'scripted' gave no usable plan"):
        collect_states([QUESTION], memory, roles, LOOP, ScriptedTeacher((1, 2, 3)))


def test_an_llm_teacher_over_a_real_openai_client_and_a_local_server(memory, stub_server):
    """The collect node with ``llm.teacher_planner`` set: each state's SFT target is the
    server's plan, asked with the planner prompt cut as training.prompt says."""
    wanted = ["the breed of Jonas's dog", "where Maya met Jonas climbing"]

    def plan_reply(request) -> Reply:  # the n-th call gets the n-th plan
        fact = wanted[len(stub_server.chat_requests) - 1]
        return Reply(
            json.dumps({"intents": [{"desired_fact": fact, "entities": ["Jonas"]}]}), 300, 20
        )

    stub_server.set_handler(plan_reply)
    backend = make_backend(
        {
            "kind": "openai",
            "model": "teacher-model",
            "base_url": stub_server.base_url,
            "timeout": 5,
            "max_retries": 1,
        },
        credentials={"api_key": "k"},
    )
    questions = to_frame([QUESTION], Question)
    params = {"collect": {"min_rounds": 2}, "prompt": {"graph_chars": 40, "max_tokens": 64}}
    loop = {"turns_first_round": 1, "turns_per_round": 1, "max_rounds": 2}
    table, report, metrics = collect_planner_states(questions, memory, backend, params, loop)
    assert report["teacher"] == "llm:teacher-model"
    assert report["teacher_calls"] == len(table) == len(stub_server.chat_requests) == 2
    assert (
        report["teacher_tokens_in"] == 600
        and metrics["collect.teacher_parse_failures"]["value"] == 0
    )
    targets = [json.loads(o)["intents"][0]["desired_fact"] for o in table["teacher_output"]]
    assert targets == wanted
    second_prompt = stub_server.chat_requests[1].messages[-1]["content"]
    assert wanted[0] in second_prompt  # round 1's query is in round 2's history
    graph = second_prompt.split("(verified facts, entities and relations):\n")[1].split("\n\n")[0]
    assert graph != "(empty)" and len(graph) == 40  # cut as the student is trained with


def test_without_a_teacher_backend_the_heuristic_teaches(memory):
    questions = to_frame([QUESTION], Question)
    _, report, _ = collect_planner_states(questions, memory, None, {}, {"max_rounds": 2})
    assert report["teacher"] == "heuristic" and report["teacher_parse_failures"] == 0
