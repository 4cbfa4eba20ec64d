"""The verifier: heuristic admission, graph deltas and sufficiency on hand-made candidates, and
the LLM verifier against a real local server."""

import json

import pytest

from mera_pipelines.core.errors import ConfigError
from mera_pipelines.core.graph import Direction, EvidenceGraph, GraphDelta, GraphNode
from mera_pipelines.core.llm.openai_backend import OpenAIBackend
from mera_pipelines.core.memory import TurnCandidate
from mera_pipelines.core.records import Question
from mera_pipelines.core.roles.seeder import HeuristicSeeder
from mera_pipelines.core.roles.verifier import (
    HeuristicVerifier,
    LLMVerifier,
    attribute_statements,
    contradicts,
    make_verifier,
    parse_verdict,
    profile_question,
)
from tests.support import openai_stub
from tests.support.openai_stub import Reply

stub_server = openai_stub.stub_server

MAY_8 = "2023-05-08T13:56"


def turn(turn_id, speaker, *facts, score=0.5, timestamp=MAY_8):
    return TurnCandidate("conv", turn_id, speaker, timestamp, list(facts), score=score)


def ask(text):
    return Question("q1", "conv", text, "", "1")


def seeded(text):
    return HeuristicSeeder().seed(ask(text)).graph


MULTI_HOP = "What job does the friend that Maya met at the gym have?"
MET_JONAS = turn(
    "D1:3",
    "Maya",
    "Maya met a new friend, Jonas, at the gym last Saturday (2023-05-06).",
    score=0.8,
)
CAKE = turn("D2:5", "Maya", "Maya baked a lemon cake for Maya's sister.", score=0.7)
SMALL_TALK = turn("D2:6", "Sam", "Sam said: Maya is the best!", score=0.75)
JONAS_JOB = turn(
    "D4:1", "Sam", "Jonas has a job as a nurse.", "Jonas lives in Berlin.", timestamp="2023-06-01"
)
CINEMA = turn("D5:2", "Sam", "Sam went to the cinema with Lena.", score=0.6)


# ---- admission ---------------------------------------------------------------------------------


def test_admits_relevant_turns_and_rejects_irrelevant_ones():
    verdict = HeuristicVerifier().verify(
        ask(MULTI_HOP), seeded(MULTI_HOP), [CAKE, SMALL_TALK, MET_JONAS], [], 1
    )
    assert verdict.accepted_turn_ids == ["D1:3"]
    assert verdict.scores["D1:3"] > 0.5
    # Only a participant's name in common: not relevant, however well it was retrieved.
    assert verdict.scores["D2:6"] == 0.0
    assert verdict.error is None


def test_a_new_entity_in_admitted_evidence_becomes_an_anchor_and_the_next_hop_is_admitted():
    graph = seeded(MULTI_HOP)
    verifier = HeuristicVerifier()
    first = verifier.verify(ask(MULTI_HOP), graph, [MET_JONAS, CAKE], [], 1)
    assert first.delta.anchors_add == ["Jonas"]  # Maya is in the question, gym is a seed
    assert not first.sufficient
    assert "multi-hop" in first.reason

    mark = graph.mark()
    graph.merge(first.delta)
    assert graph.new_anchors_since(mark) == ["Jonas"]

    # Round 2 searched for Jonas: a turn that names the anchor is admitted although it shares
    # only "job" with the question, and the question is now covered end to end.
    second = verifier.verify(ask(MULTI_HOP), graph, [CINEMA, JONAS_JOB], [MET_JONAS], 2)
    assert second.accepted_turn_ids == ["D4:1"]
    assert second.sufficient, second.reason


def test_the_turn_naming_an_anchor_outranks_one_that_does_not():
    graph = seeded(MULTI_HOP)
    graph.merge(HeuristicVerifier().verify(ask(MULTI_HOP), graph, [MET_JONAS], [], 1).delta)
    other_job = turn("D6:1", "Sam", "Sam has a new job at the bakery.")
    scores = HeuristicVerifier().verify(ask(MULTI_HOP), graph, [other_job, JONAS_JOB], [], 2).scores
    assert scores["D4:1"] > scores["D6:1"]


def test_at_most_max_accept_turns_are_admitted_best_first():
    candidates = [
        turn("D1:1", "Maya", "Maya went hiking."),
        turn("D1:2", "Maya", "Maya went hiking in the Alps with Jonas."),
        turn("D1:3", "Maya", "Maya loves hiking in the Alps."),
        turn("D1:4", "Maya", "Maya bought hiking boots."),
    ]
    question = "Where in the Alps did Maya go hiking with Jonas?"
    verdict = HeuristicVerifier(max_accept=2).verify(
        ask(question), seeded(question), candidates, [], 1
    )
    assert verdict.accepted_turn_ids == ["D1:2", "D1:3"]
    assert (
        len(
            HeuristicVerifier()
            .verify(ask(question), seeded(question), candidates, [], 1)
            .accepted_turn_ids
        )
        == 4
    )


def test_a_high_retrieval_score_adds_a_small_bonus():
    same = "Maya went hiking in the Alps."
    verdict = HeuristicVerifier().verify(
        ask("Where did Maya go hiking?"),
        EvidenceGraph(),
        [turn("D1:1", "Maya", same, score=0.9), turn("D1:2", "Maya", same, score=0.6)],
        [],
        1,
    )
    assert verdict.scores["D1:1"] == pytest.approx(verdict.scores["D1:2"] + 0.1)


def test_thresholds_are_parameters():
    question = "Where did Maya go hiking?"
    candidates = [turn("D1:1", "Maya", "Maya bought new boots for hiking.")]
    assert (
        HeuristicVerifier()
        .verify(ask(question), EvidenceGraph(), candidates, [], 1)
        .accepted_turn_ids
    )
    strict = HeuristicVerifier(min_score=2.0)
    assert strict.verify(ask(question), EvidenceGraph(), candidates, [], 1).accepted_turn_ids == []


# ---- the graph delta -----------------------------------------------------------------------------


def test_delta_uses_the_resolved_event_date_not_the_turn_time():
    graph = seeded(MULTI_HOP)
    verdict = HeuristicVerifier().verify(ask(MULTI_HOP), graph, [MET_JONAS], [], 1)
    graph.merge(verdict.delta)
    date = graph.find("2023-05-06", "date")
    assert date is not None and date.provenance == {"D1:3"}
    assert graph.find("2023-05-08", "date") is None
    maya = graph.find("Maya")
    assert maya.provenance == {"D1:3"} and maya.from_question
    assert graph.find("Jonas").type == "person"
    relations = {
        (graph.nodes[r.source_id].label, r.label, graph.nodes[r.target_id].label)
        for r in graph.relations
    }
    assert ("Maya", "mentions", "Jonas") in relations
    # the seed concept, now with evidence (co-occurs has no direction: stored once, by node id)
    assert ("gym", "co-occurs", "Jonas") in relations
    assert graph.find("gym").provenance == {"D1:3"}


def test_attributes_carry_the_turn_time_and_conflicts_stay_as_versions():
    question = "What does Jonas do for work?"
    graph = seeded(question)
    verifier = HeuristicVerifier()
    old = turn("D2:1", "Sam", "Jonas works as a nurse.", timestamp="2023-03-01T09:00")
    new = turn("D9:4", "Sam", "Jonas works as a teacher now.", timestamp="2023-09-01T09:00")
    graph.merge(verifier.verify(ask(question), graph, [new], [], 1).delta)
    graph.merge(verifier.verify(ask(question), graph, [old], [new], 2).delta)
    versions = graph.find("Jonas").attributes["occupation"]
    assert [(v.value, v.turn_id, v.time) for v in versions] == [
        ("a nurse", "D2:1", "2023-03-01T09:00"),
        ("a teacher now", "D9:4", "2023-09-01T09:00"),
    ]


def test_attribute_statements():
    text = "Jonas lives in Berlin and works hard. Maya's dog is Pepper. Maya is so happy."
    assert attribute_statements(text, ["Jonas", "Maya"]) == [
        ("Jonas", "residence", "Berlin"),
        ("Maya", "dog", "Pepper"),
    ]
    assert attribute_statements("Jonas is hiking this weekend.", ["Jonas"]) == []
    assert attribute_statements("Lena is a chef.", ["Jonas"]) == []


def test_speakers_and_ubiquitous_names_are_not_anchors():
    question = "Which city did Maya visit?"
    candidates = [
        turn("D1:1", "Maya", "Maya told Sam about the city of Porto and Lena's cafe there."),
        turn("D1:2", "Maya", "Maya told Sam that the city was lovely."),
        turn("D1:3", "Maya", "Maya and Sam talked about the city trip."),
    ]
    verdict = HeuristicVerifier().verify(ask(question), seeded(question), candidates, [], 1)
    # Sam is named in every turn (the other participant, who does not speak here): no anchor.
    assert verdict.delta.anchors_add == ["Porto", "Lena"]
    verdict = HeuristicVerifier(max_new_anchors=1).verify(
        ask(question), seeded(question), candidates, [], 1
    )
    assert verdict.delta.anchors_add == ["Porto"]


# ---- sufficiency -----------------------------------------------------------------------------------


def test_sufficient_only_when_the_question_is_covered():
    question = "What cake did Maya bake for her sister?"
    verifier = HeuristicVerifier()
    partial = turn("D2:1", "Maya", "Maya baked a cake.")
    verdict = verifier.verify(ask(question), seeded(question), [partial], [], 1)
    assert verdict.accepted_turn_ids == ["D2:1"]
    assert not verdict.sufficient and "sister" in verdict.reason
    verdict = verifier.verify(ask(question), seeded(question), [CAKE], [partial], 2)
    assert verdict.sufficient


def test_nothing_admitted_is_never_sufficient():
    verdict = HeuristicVerifier().verify(ask("Who is Lena?"), EvidenceGraph(), [], [], 1)
    assert verdict.accepted_turn_ids == [] and not verdict.sufficient
    assert verdict.delta == GraphDelta()


def test_a_temporal_question_needs_a_date_node():
    question = "When did Maya meet Jonas at the gym?"  # "meet" is covered by "met"
    verifier = HeuristicVerifier()
    undated = turn("D1:1", "Maya", "Maya met Jonas at the gym.")
    verdict = verifier.verify(ask(question), seeded(question), [undated], [], 1)
    assert verdict.accepted_turn_ids == ["D1:1"]
    assert not verdict.sufficient and "date" in verdict.reason
    verdict = verifier.verify(ask(question), seeded(question), [MET_JONAS], [undated], 2)
    assert verdict.sufficient, verdict.reason


@pytest.mark.parametrize(
    ("text", "multi_hop", "temporal"),
    [
        ("What job does the friend that Maya met at the gym have?", True, False),
        ("What is the name of the dog of Maya's sister?", True, False),
        ("Where did Maya go and what did she buy there?", True, False),
        ("When did Maya adopt Pepper?", False, True),
        ("How long has Jonas worked as a nurse?", False, True),
        ("What year did Maya move to Lisbon?", False, True),
        ("Which team does Jonas support?", False, False),
    ],
)
def test_question_profile(text, multi_hop, temporal):
    profile = profile_question(text)
    assert (profile.multi_hop, profile.temporal) == (multi_hop, temporal)


def test_a_question_date_is_covered_by_a_turn_on_that_day():
    question = "What did Maya bake on 8 May, 2023?"
    assert profile_question(question).dates == ["2023-05-08"]
    on_the_day = turn("D2:5", "Maya", "Maya baked bread.", timestamp="2023-05-08T10:00")
    other_day = turn("D7:1", "Maya", "Maya baked bread.", timestamp="2023-07-01T10:00")
    scores = (
        HeuristicVerifier()
        .verify(ask(question), EvidenceGraph(), [other_day, on_the_day], [], 1)
        .scores
    )
    assert scores["D2:5"] > scores["D7:1"]


# ---- contradiction ----------------------------------------------------------------------------------


def test_a_direction_is_marked_invalid_only_when_evidence_negates_it():
    question = "Where did Maya travel with the friend she met at the gym?"
    graph = seeded(question)
    graph.merge(
        GraphDelta(
            nodes=[GraphNode("", "Lisbon", "location", provenance={"D1:1"})], anchors_add=["Lisbon"]
        )
    )
    neutral = turn("D3:1", "Maya", "Maya and Jonas talked about travel plans for Lisbon.")
    verdict = HeuristicVerifier().verify(ask(question), graph, [neutral], [], 2)
    assert verdict.delta.invalid_directions == []

    negating = turn(
        "D3:2", "Maya", "Maya never went to Lisbon with Jonas, the travel fell through."
    )
    verdict = HeuristicVerifier().verify(ask(question), graph, [negating], [], 2)
    (direction,) = verdict.delta.invalid_directions
    assert direction.text == "Lisbon" and direction.turn_ids == ["D3:2"]
    assert verdict.delta.anchors_retire == ["Lisbon"]
    graph.merge(verdict.delta)
    assert graph.is_exhausted("Lisbon") and "Lisbon" not in graph.anchor_labels()


def test_a_negated_question_entity_is_an_answer_not_an_invalid_direction():
    question = "Did Maya ever go to Lisbon?"
    answer = turn("D3:2", "Maya", "Maya never went to Lisbon.")
    verdict = HeuristicVerifier().verify(ask(question), seeded(question), [answer], [], 1)
    assert verdict.accepted_turn_ids == ["D3:2"]
    assert verdict.delta.invalid_directions == []


def test_given_directions_are_checked_too():
    answer = turn("D3:2", "Maya", "On Friday Maya didn't go to the pottery class after all.")
    verdict = HeuristicVerifier().verify(
        ask("What did Maya do on Friday?"),
        EvidenceGraph(),
        [answer],
        [],
        1,
        directions=["pottery class"],
    )
    assert [d.text for d in verdict.delta.invalid_directions] == ["pottery class"]


@pytest.mark.parametrize(
    ("text", "direction", "expected"),
    [
        ("Maya never went to Lisbon.", "Lisbon", True),
        ("Maya has not been to the Lisbon office.", "Lisbon", True),
        ("Maya didn't visit Lisbon.", "Lisbon", True),
        ("Maya went to Lisbon.", "Lisbon", False),
        ("Maya never liked the cold, so she went to Lisbon.", "Lisbon", False),
        ("Maya is not sure what she thinks about all the many Lisbon trips.", "Lisbon", False),
    ],
)
def test_contradicts(text, direction, expected):
    assert contradicts(text, direction) is expected


# ---- LLM ---------------------------------------------------------------------------------------------


def backend_for(server):
    return OpenAIBackend(
        "stub-model", base_url=server.base_url, api_key="k", timeout=2.0, max_retries=0
    )


def llm_answer(**overrides):
    answer = {
        "accepted": ["D1:3", "D9:9"],
        "nodes": [
            {
                "label": "Jonas",
                "type": "person",
                "attributes": {"met at": "the gym"},
                "turn_ids": ["D1:3"],
            },
            {"label": "2023-05-06", "type": "date"},
            {"label": "Atlantis", "type": "location", "turn_ids": ["D9:9"]},
        ],
        "relations": [{"source": "Maya", "label": "met", "target": "Jonas", "turn_ids": ["D1:3"]}],
        "anchors": ["Jonas"],
        "invalid_directions": [{"direction": "Lisbon", "reason": "a hunch"}],
        "sufficient": False,
        "reason": "the job of Jonas is still unknown",
    }
    answer.update(overrides)
    return json.dumps(answer)


def test_llm_verifier_prompt_fences_the_rendered_candidates(stub_server):
    stub_server.enqueue(Reply(llm_answer()))
    LLMVerifier(backend_for(stub_server)).verify(
        ask(MULTI_HOP), seeded(MULTI_HOP), [MET_JONAS, CAKE], [CINEMA], 2
    )
    (request,) = stub_server.chat_requests
    prompt = request.messages[-1]["content"]
    fenced = f"<<<CANDIDATES\n{MET_JONAS.render()}\n{CAKE.render()}\nCANDIDATES>>>"
    assert fenced in prompt
    assert "[D1:3] (2023-05-08T13:56, Maya) Maya met a new friend" in prompt
    assert f"<<<ACCEPTED\n{CINEMA.render()}\nACCEPTED>>>" in prompt
    assert "Anchors: Maya (person)" in prompt  # the graph as text
    assert "Turn time is not event time" in prompt
    assert "same explicit calculation for ages, amounts" in prompt


def test_llm_verifier_drops_unknown_ids_and_unsupported_nodes(stub_server):
    stub_server.enqueue(Reply(llm_answer(), prompt_tokens=400, completion_tokens=120))
    graph = seeded(MULTI_HOP)
    verdict = LLMVerifier(backend_for(stub_server)).verify(
        ask(MULTI_HOP), graph, [MET_JONAS, CAKE], [], 1
    )
    assert verdict.error is None
    assert verdict.accepted_turn_ids == ["D1:3"]
    assert verdict.dropped_turn_ids == ["D9:9"]
    assert (verdict.tokens_in, verdict.tokens_out) == (400, 120)
    assert not verdict.sufficient and verdict.reason == "the job of Jonas is still unknown"
    labels = [n.label for n in verdict.delta.nodes]
    assert labels == ["Jonas", "2023-05-06"]  # Atlantis cites only an unknown turn
    date = verdict.delta.nodes[1]
    assert date.provenance == {"D1:3"}  # found by its label in the admitted turn
    stats = graph.merge(verdict.delta)
    assert stats.directions_rejected == 1  # "a hunch" cites no contradicting turn
    jonas = graph.find("Jonas")
    assert jonas.attributes["met at"][0].time == MAY_8
    assert graph.anchor_labels()[-1] == "Jonas"


@pytest.mark.parametrize(
    "reply",
    [Reply.malformed_json(), Reply('{"accepted": "all of them"}'), Reply('["D1:3"]')],
)
def test_llm_verifier_falls_back_to_the_heuristic_with_the_error(stub_server, reply):
    stub_server.enqueue(reply, reply)  # the answer and the one re-ask
    verdict = LLMVerifier(backend_for(stub_server)).verify(
        ask(MULTI_HOP), seeded(MULTI_HOP), [MET_JONAS, CAKE], [], 1
    )
    assert verdict.error is not None
    expected = HeuristicVerifier().verify(
        ask(MULTI_HOP), seeded(MULTI_HOP), [MET_JONAS, CAKE], [], 1
    )
    assert verdict.accepted_turn_ids == expected.accepted_turn_ids == ["D1:3"]
    assert verdict.delta == expected.delta


def test_llm_verifier_with_nothing_to_judge_makes_no_call(stub_server):
    verdict = LLMVerifier(backend_for(stub_server)).verify(
        ask(MULTI_HOP), EvidenceGraph(), [], [], 3
    )
    assert stub_server.chat_requests == []
    assert not verdict.sufficient


def test_parse_verdict_keeps_directions_backed_by_shown_turns():
    verdict = parse_verdict(
        {
            "accepted": ["[D1:3]"],
            "sufficient": "false",
            "invalid_directions": [
                {"direction": "Lisbon", "reason": "never went", "turn_ids": ["D1:3", "D7:7"]}
            ],
        },
        [MET_JONAS],
        [],
    )
    assert verdict.accepted_turn_ids == ["D1:3"] and verdict.sufficient is False
    assert verdict.delta.invalid_directions == [Direction("Lisbon", "never went", ["D1:3"])]
    with pytest.raises(ValueError, match="sufficient"):
        parse_verdict({"accepted": []}, [MET_JONAS], [])


def test_make_verifier():
    verifier = make_verifier("heuristic", max_accept=3, min_score=0.4)
    assert isinstance(verifier, HeuristicVerifier) and verifier.max_accept == 3
    with pytest.raises(ConfigError, match="needs an LLM backend"):
        make_verifier("llm")
    with pytest.raises(ConfigError, match="Unknown parameter"):
        make_verifier("heuristic", threshold=0.3)
    with pytest.raises(ConfigError, match="Unknown verifier kind"):
        make_verifier("oracle")
    with pytest.raises(ConfigError, match="max_accept"):
        make_verifier("heuristic", max_accept=0)
