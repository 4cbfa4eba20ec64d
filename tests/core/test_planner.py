from __future__ import annotations

import json

import pytest

from mera_pipelines.core.errors import ConfigError
from mera_pipelines.core.llm.openai_backend import OpenAIBackend
from mera_pipelines.core.roles.planner import (
    HeuristicPlanner,
    LLMPlanner,
    PlannerState,
    complement_intents,
    intents_to_json,
    is_repeat,
    parse_intents,
    plan_template,
    question_topics,
    render_plan_prompt,
)
from tests.support import openai_stub
from tests.support.openai_stub import Reply

stub_server = openai_stub.stub_server

QUESTION = "What breed is the dog of the friend Maya met at the climbing gym?"


def state(round_index=1, history=(), anchors=(), new_anchors=(), uncovered=()):
    return PlannerState(
        QUESTION,
        "",
        list(history),
        list(anchors),
        list(new_anchors),
        list(uncovered),
        round_index,
        max_intents=3,
    )


def test_first_round_asks_the_question_and_its_key_terms():
    intents = HeuristicPlanner().plan(state()).intents
    assert intents[0].desired_fact == QUESTION
    assert "Maya" in intents[0].entities
    assert "climbing" in intents[1].query_text() and "?" not in intents[1].query_text()


def test_topic_labels_can_be_left_out_of_every_intent():
    labelled = HeuristicPlanner().plan(state()).intents
    assert labelled[0].topics  # the dog and gym question has coarse topics
    for planner_state in (state(), state(round_index=2, new_anchors=["Lena"], uncovered=["breed"])):
        intents = HeuristicPlanner(topic_labels=False).plan(planner_state).intents
        assert intents and all(not intent.topics for intent in intents)
    assert HeuristicPlanner(topic_labels=False).plan(state()).intents[0].desired_fact == QUESTION


def test_later_rounds_follow_new_anchors_and_never_repeat():
    first = [i.query_text() for i in HeuristicPlanner().plan(state()).intents]
    second = (
        HeuristicPlanner()
        .plan(
            state(2, history=first, anchors=["Jonas"], new_anchors=["Jonas"], uncovered=["breed"])
        )
        .intents
    )
    assert second[0].entities == ["Jonas"]
    assert not any(is_repeat(i.query_text(), first) for i in second)
    assert len(second) <= 3


def test_repeats_are_detected_by_word_set():
    assert is_repeat("gym climbing Maya", ["Maya climbing gym"])
    assert not is_repeat("Jonas dog", ["Maya climbing gym"])


def test_parse_intents_accepts_common_shapes_and_drops_junk():
    assert [i.desired_fact for i in parse_intents({"intents": [{"desired_fact": "a"}, 3, {}]})] == [
        "a"
    ]
    assert parse_intents([{"query": "b", "entities": "X, Y"}])[0].entities == ["X", "Y"]
    assert parse_intents({"desired_fact": "c"})[0].desired_fact == "c"
    assert parse_intents("nonsense") == []


def test_llm_planner_reads_intents_from_a_real_server(stub_server):
    reply = {
        "intents": [
            {"desired_fact": "Jonas's dog breed", "entities": ["Jonas"], "topics": ["pets"]}
        ]
    }
    stub_server.enqueue(Reply(json.dumps(reply), prompt_tokens=50, completion_tokens=12))
    backend = OpenAIBackend("planner-model", base_url=stub_server.base_url, api_key="k")
    result = LLMPlanner(backend).plan(state(2, new_anchors=["Jonas"], anchors=["Jonas"]))
    assert [i.query_text() for i in result.intents] == ["Jonas's dog breed Jonas pets"]
    assert (result.tokens_in, result.tokens_out, result.parse_failed) == (50, 12, False)
    prompt = stub_server.chat_requests[0].messages[-1]["content"]
    assert QUESTION in prompt and "Jonas" in prompt


def test_the_draft_prompt_carries_the_heuristic_plan_for_the_same_state():
    later = state(2, history=[QUESTION], anchors=["Jonas"], new_anchors=["Jonas"])
    heuristic_plan = intents_to_json(HeuristicPlanner().plan(later).intents)

    [_, with_draft] = render_plan_prompt(plan_template(draft=True), later)
    [_, plain] = render_plan_prompt(plan_template(), later)

    assert heuristic_plan in with_draft["content"] and "Jonas" in heuristic_plan
    assert "draft" not in plain["content"] and heuristic_plan not in plain["content"]
    assert "${" not in with_draft["content"]  # every placeholder filled


def test_the_hints_prompt_names_the_questions_topic_labels_and_names():
    topics = question_topics(QUESTION)
    assert topics  # the dog and gym question has labels, as the heuristic's first intent
    assert HeuristicPlanner().plan(state()).intents[0].topics == topics

    for template in (plan_template(), plan_template(draft=True)):
        [_, hinted] = render_plan_prompt(template, state(), hints=True)
        [_, plain] = render_plan_prompt(template, state())
        assert (
            f"Question topics: {', '.join(topics)}\nNames in the question: Maya\n"
            in (hinted["content"])
        )
        assert "Question topics" not in plain["content"] and "${" not in plain["content"]
        # off, the prompt is the one planners trained before the option saw
        assert (
            hinted["content"].replace(
                f"\nQuestion topics: {', '.join(topics)}\nNames in the question: Maya", ""
            )
            == plain["content"]
        )


def test_hints_say_none_when_a_question_has_no_labels_or_names():
    bare = PlannerState("when did it happen?", "", [], [], [], [], 1)
    [_, hinted] = render_plan_prompt(plan_template(), bare, hints=True)
    assert "Question topics: (none)\nNames in the question: (none)" in hinted["content"]


def test_llm_planner_with_hints_sends_them(stub_server):
    reply = {"intents": [{"desired_fact": "dog breed", "entities": ["Maya"], "topics": []}]}
    stub_server.enqueue(Reply(json.dumps(reply)), Reply(json.dumps(reply)))
    backend = OpenAIBackend("planner-model", base_url=stub_server.base_url, api_key="k")
    LLMPlanner(backend, hints=True).plan(state())
    LLMPlanner(backend).plan(state())
    hinted, plain = (r.messages[-1]["content"] for r in stub_server.chat_requests)
    assert "Names in the question: Maya" in hinted and "Names in the question" not in plain


def test_hints_with_a_prompt_that_has_no_place_for_them_is_a_clear_error():
    backend = OpenAIBackend("planner-model", base_url="http://127.0.0.1:9", api_key="k")
    with pytest.raises(ConfigError, match=r"no \$\{hints\} placeholder"):
        LLMPlanner(backend, prompt_template="Question: ${question}", hints=True)


def test_llm_planner_with_draft_sends_the_draft_prompt(stub_server):
    reply = {"intents": [{"desired_fact": "dog breed", "entities": ["Maya"], "topics": []}]}
    stub_server.enqueue(Reply(json.dumps(reply)))
    backend = OpenAIBackend("planner-model", base_url=stub_server.base_url, api_key="k")
    LLMPlanner(backend, draft=True).plan(state())
    prompt = stub_server.chat_requests[0].messages[-1]["content"]
    assert intents_to_json(HeuristicPlanner().plan(state()).intents) in prompt


def test_a_complementing_planner_searches_its_intents_then_the_heuristics(stub_server):
    reply = {"intents": [{"desired_fact": "dog breed of the gym friend", "entities": ["Maya"]}]}
    stub_server.enqueue(Reply(json.dumps(reply)), Reply(json.dumps(reply)))
    backend = OpenAIBackend("planner-model", base_url=stub_server.base_url, api_key="k")
    heuristic = [i.query_text() for i in HeuristicPlanner().plan(state()).intents]

    plain = LLMPlanner(backend).plan(state()).intents
    complemented = LLMPlanner(backend, complement=True).plan(state()).intents

    assert [i.query_text() for i in plain] == ["dog breed of the gym friend Maya"]
    assert [i.query_text() for i in complemented] == [
        "dog breed of the gym friend Maya",
        *heuristic,
    ]
    # the same prompt: complementing changes what is searched, not what the model sees
    assert stub_server.chat_requests[0].messages == stub_server.chat_requests[1].messages


def test_complement_intents_drop_repeats_and_keep_the_models_first():
    heuristic = HeuristicPlanner().plan(state()).intents
    copy = json.loads(intents_to_json(heuristic[:1]))["intents"][0]  # the heuristic's own first
    own = parse_intents({"intents": [copy, {"desired_fact": "Maya dog"}]})

    merged = complement_intents(own, heuristic, history=[], limit=3)

    # the model's copy of the heuristic's first intent stands for it (same words), and the cap
    # leaves room for one of the heuristic's intents after the model's two
    assert [i.query_text() for i in merged] == [
        own[0].query_text(),
        "Maya dog",
        heuristic[1].query_text(),
    ]
    assert complement_intents(own, heuristic, history=["Maya dog"], limit=3)[1] == heuristic[1]


def test_unparseable_llm_plan_is_counted_and_the_heuristic_steps_in(stub_server):
    stub_server.enqueue(Reply.malformed_json(), Reply.malformed_json())
    backend = OpenAIBackend(
        "planner-model", base_url=stub_server.base_url, api_key="k", max_retries=0
    )
    result = LLMPlanner(backend).plan(state())
    assert result.parse_failed and result.error
    assert result.intents[0].desired_fact == QUESTION
    # the two unusable replies still cost tokens, and the usage report counts them
    assert (result.tokens_in, result.tokens_out) == (2 * 11, 2 * 7)


def test_question_continuation_reads_further_down_the_questions_ranking():
    first = [i.query_text() for i in HeuristicPlanner().plan(state()).intents]
    planner = HeuristicPlanner(continue_question=True)
    second = planner.plan(state(2, history=first, new_anchors=["Jonas"], anchors=["Jonas"]))
    assert second.intents[-1].desired_fact == QUESTION
    assert second.intents[0].entities == ["Jonas"] and len(second.intents) <= 3
