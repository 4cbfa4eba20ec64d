"""Training QA synthesis: cloze questions, types, grounding, training memories only."""

from __future__ import annotations

import random

import numpy as np
import pytest

from mera_pipelines.core.errors import ConfigError
from mera_pipelines.core.records import Fact, Question, Turn
from mera_pipelines.core.text import content_words, tokenize
from mera_pipelines.core.training.synthesis import (
    CATEGORIES,
    Draft,
    HeuristicQuestionWriter,
    Statement,
    SynthesisSettings,
    annotated_questions,
    category_of,
    cloze,
    grounding_problem,
    observations_from_locomo,
    shorten_question,
    statements_from_facts,
    synthesize_questions,
)

TIME = "2023-03-14T16:12"
TURN_TEXTS = {
    "D1:1": ("Maya", "I joined a climbing gym near my apartment last month."),
    "D1:2": ("Theo", "My teacher Ruth says I might play in the spring concert."),
    "D1:3": ("Maya", "I met Priya at the gym on Sunday, she shows me routes."),
    "D2:1": ("Theo", "Ruth cried a little at the concert, but she will deny it."),
    "D2:2": ("Maya", "Biscuit stole my spot on the couch yesterday."),
}
FACT_TEXTS = {
    "D1:1": "Maya joined a climbing gym near Maya's apartment last month (February 2023).",
    "D1:2": "Theo's teacher Ruth says Theo might play in the spring concert.",
    "D1:3": "Maya met Priya at the gym on Sunday (2023-03-12) and Priya shows Maya routes.",
    "D2:1": "Ruth cried a little at the concert but Ruth will deny it.",
    "D2:2": "Biscuit stole Maya's spot on the couch yesterday (2023-03-13).",
}


def turns(memory_id: str = "m1") -> list[Turn]:
    return [
        Turn(memory_id, "s", 1, tid, i, speaker, text, session_time=TIME)
        for i, (tid, (speaker, text)) in enumerate(TURN_TEXTS.items())
    ]


def facts(memory_id: str = "m1") -> list[Fact]:
    return [
        Fact(f"{memory_id}|{tid}|0", memory_id, tid, text, [], [], TURN_TEXTS[tid][0], TIME, [text])
        for tid, text in FACT_TEXTS.items()
    ]


def test_cloze_replaces_the_span_and_drops_its_article():
    question = cloze("Maya joined a climbing gym near her apartment.", "climbing gym")
    assert question == "Maya joined what near her apartment?"
    assert cloze("Maya joined a gym.", "pottery") is None


def test_statements_drop_attribution_prefix_and_questions():
    fact = facts()[0]
    said = Fact(
        "f",
        "m1",
        "D1:1",
        "Maya said: The Portland rain never stops here.",
        [],
        [],
        "Maya",
        TIME,
        [],
    )
    asked = Fact(
        "g", "m1", "D1:1", "Maya asked: How is Theo doing these days?", [], [], "Maya", TIME, []
    )
    texts = [s.text for s in statements_from_facts([fact, said, asked])]
    assert texts == [fact.text, "The Portland rain never stops here."]


def test_observations_are_read_with_their_evidence_ids():
    sample = {
        "sample_id": "conv-1",
        "observation": {
            "session_1_observation": {
                "Maya": [
                    ["Maya has a beagle named Biscuit.", "D1:13"],
                    ["Maya and Theo talk.", ["D1:1", "D1:2"]],
                    "garbage",
                ]
            }
        },
    }
    found = observations_from_locomo([sample, {"sample_id": "x"}])
    assert [(s.text, s.turn_ids) for s in found] == [
        ("Maya has a beagle named Biscuit.", ("D1:13",)),
        ("Maya and Theo talk.", ("D1:1", "D1:2")),
    ]


def test_grounding_rejects_each_problem():
    text = {"D1:1": "Maya climbing gym apartment"}
    indexed = {"D1:1"}

    def problem(**kw):
        base = dict(
            memory_id="m",
            question="Maya joined what near the apartment?",
            answer="climbing gym",
            turn_ids=("D1:1",),
            qa_type="single_hop",
        )
        return grounding_problem(Draft(**{**base, **kw}), text, indexed, 8)

    assert problem() is None
    assert problem(turn_ids=()) == "no_evidence"
    assert problem(turn_ids=("D9:9",)) == "evidence_not_in_memory"
    assert problem(answer="pottery class") == "answer_not_in_evidence"
    assert problem(question="What about the climbing gym of Maya?") == "answer_in_question"
    assert problem(answer="one two three four five six seven eight nine") == "answer_length"


def test_synthesis_writes_grounded_questions_of_every_type_for_training_memories_only():
    all_turns = turns("m1") + turns("m2")
    all_facts = facts("m1") + facts("m2")
    questions, report = synthesize_questions(
        ["m1"], all_turns, all_facts, HeuristicQuestionWriter(), SynthesisSettings(seed=3)
    )
    assert questions, report.as_dict()
    assert {q.memory_id for q in questions} == {"m1"}
    assert report.memories == ["m1"]
    types = {q.category for q in questions}
    assert {"single_hop", "temporal", "multi_hop"} <= types, report.as_dict()
    for q in questions:
        assert q.gold_turn_ids and set(q.gold_turn_ids) <= set(TURN_TEXTS)
        assert q.question.endswith("?")
    temporal = [q for q in questions if q.category == "temporal"]
    assert {"February 2023", "2023-03-12", "2023-03-13"} & {q.answer for q in temporal}
    for q in [q for q in questions if q.category == "multi_hop"]:
        assert len(q.gold_turn_ids) == 2
        assert "Ruth" not in q.question and "Priya" not in q.question  # the bridge is hidden
    assert sum(report.written.values()) == len(questions)


def test_synthesis_is_deterministic_for_a_seed():
    def run():
        return synthesize_questions(
            ["m1"], turns(), facts(), HeuristicQuestionWriter(), SynthesisSettings(seed=1)
        )[0]

    assert run() == run()


def test_rejected_items_are_counted_by_reason():
    broken = [Statement("m1", "Maya adopted a parrot named Kiwi.", ("D1:1",), "Maya", TIME, "fact")]
    writer = HeuristicQuestionWriter()
    drafts = writer.write(broken, ["single_hop"], 5, random.Random(0))
    assert drafts  # a cloze is written ...
    questions, report = synthesize_questions(
        ["m1"], turns(), [], writer, SynthesisSettings(types=("single_hop",)), broken
    )
    assert not questions  # ... but "Kiwi"/"parrot" is in no turn and D1:1 has no indexed fact
    assert sum(report.rejected.values()) >= 1


def test_settings_reject_unknown_types():
    with pytest.raises(ConfigError, match="types"):
        SynthesisSettings.from_params({"types": ["trivia"]})


def test_shorten_question_keeps_the_subject_and_a_window_around_the_asked_word():
    long = "Theo adopted a second cat, an orange kitten named what, from the shelter downtown?"
    assert shorten_question(long, 2) == "Theo kitten named what, from the?"
    # no asked word (a temporal question's statement): the first 2 * window + 1 words after it
    assert (
        shorten_question("Maya joined a climbing gym near the flat", 1) == "Maya joined a climbing?"
    )


def test_question_window_shortens_single_hop_and_temporal_questions():
    statements = statements_from_facts(facts())
    rng = random.Random(0)
    whole = HeuristicQuestionWriter().write(statements, ["single_hop", "temporal"], 10, rng)
    rng = random.Random(0)
    short = HeuristicQuestionWriter(question_window=1).write(
        statements, ["single_hop", "temporal"], 10, rng
    )
    assert [d.answer for d in short] == [d.answer for d in whole]
    assert [d.turn_ids for d in short] == [d.turn_ids for d in whole]
    for full, cut in zip(whole, short, strict=True):
        # shorter, but widened until it keeps three content words to ask about
        assert len(cut.question.split()) <= len(full.question.split())
        assert len(content_words(cut.question)) >= 3
    assert any(len(c.question) < len(f.question) for f, c in zip(whole, short, strict=True))


def test_settings_reject_a_window_below_one():
    with pytest.raises(ConfigError, match="question_window"):
        SynthesisSettings.from_params({"question_window": 0})
    assert SynthesisSettings.from_params({"question_window": None}).question_window is None


def topic_statements() -> list[Statement]:
    """Maya talks about pottery in two turns of different sessions, Theo about his violin."""
    texts = [
        ("D1:1", "Maya", "Maya started a pottery class at the community studio downtown."),
        ("D2:1", "Maya", "Maya glazed a blue pottery bowl for Maya's grandmother."),
        ("D1:2", "Theo", "Theo practised the violin sonata for the spring recital."),
    ]
    return [Statement("m1", text, (tid,), speaker, TIME, "fact") for tid, speaker, text in texts]


def test_topic_style_names_the_speaker_and_only_a_few_of_the_statements_words():
    writer = HeuristicQuestionWriter(question_style="topic")
    drafts = writer.write(topic_statements(), ["single_hop"], 10, random.Random(0))
    by_turn = {d.turn_ids: d for d in drafts}
    violin = by_turn[("D1:2",)]
    assert violin.question.startswith("What did Theo say about ")
    # two keywords asked about, a third (the first in importance) is the answer
    statement_words = set(content_words(topic_statements()[2].text))
    asked = set(content_words(violin.question)) - {"theo", "say"}
    assert len(asked) == 2 and asked <= statement_words
    assert violin.answer.lower() in statement_words and violin.answer.lower() not in asked


def test_common_topic_words_name_the_keywords_other_turns_use_most():
    # Theo's spring and recital recur in other turns; violin (the answer) and sonata do not
    others = [
        ("D3:1", "Theo", "Theo bought new shoes for the spring recital season."),
        ("D4:1", "Theo", "Theo watched a recital at the spring fair."),
        ("D5:1", "Theo", "Theo said the spring weather was lovely."),
    ]
    statements = topic_statements() + [
        Statement("m1", text, (tid,), speaker, TIME, "fact") for tid, speaker, text in others
    ]
    rare = HeuristicQuestionWriter(question_style="topic")
    common = HeuristicQuestionWriter(question_style="topic", topic_words="common")

    def violin_question(writer: HeuristicQuestionWriter) -> Draft:
        drafts = writer.write(statements, ["single_hop"], 10, random.Random(0))
        return next(d for d in drafts if d.turn_ids == ("D1:2",))

    assert violin_question(rare).question == "What did Theo say about sonata and spring?"
    # spring is in 4 turns, recital in 3: the most used first, the answer stays the same
    assert violin_question(common).question == "What did Theo say about spring and recital?"
    assert violin_question(common).answer == violin_question(rare).answer == "violin"


def test_common_topic_words_ask_temporal_questions_with_two_words():
    statements = statements_from_facts(facts())
    writer = HeuristicQuestionWriter(question_style="topic", topic_words="common")
    drafts = writer.write(statements, ["temporal"], 10, random.Random(0))
    gym = next(d for d in drafts if d.turn_ids == ("D1:1",))
    asked = content_words(gym.question.removeprefix("When did Maya mention "))
    assert len(asked) == 2 and gym.answer == "February 2023"


def test_settings_reject_unknown_topic_words():
    with pytest.raises(ConfigError, match="topic_words"):
        SynthesisSettings.from_params({"topic_words": "obscure"})
    assert SynthesisSettings.from_params({"topic_words": "common"}).topic_words == "common"


def test_topic_style_multi_hop_gathers_one_speakers_turns_about_a_word():
    writer = HeuristicQuestionWriter(question_style="topic")
    drafts = writer.write(topic_statements(), ["multi_hop"], 10, random.Random(0))
    pottery = [d for d in drafts if "pottery" in d.question]
    assert len(pottery) == 1
    assert pottery[0].question == "What has Maya mentioned about pottery?"
    assert pottery[0].turn_ids == ("D1:1", "D2:1")
    # a word that only one turn uses gathers nothing
    assert not any("violin" in d.question for d in drafts)


def test_shared_aggregates_ask_about_a_word_the_other_speaker_uses_too():
    # Theo mentions pottery once: Maya's two pottery turns meet his as a distractor
    theo_pottery = Statement(
        "m1", "Theo admired the pottery mugs at the market.", ("D3:1",), "Theo", TIME, "fact"
    )
    statements = topic_statements() + [theo_pottery]
    keyword = HeuristicQuestionWriter(question_style="topic")
    shared = HeuristicQuestionWriter(question_style="topic", aggregate="shared")

    def pottery(writer: HeuristicQuestionWriter) -> list[Draft]:
        drafts = writer.write(statements, ["multi_hop"], 10, random.Random(0))
        return [d for d in drafts if "pottery" in d.question]

    assert pottery(keyword) == []  # the keyword aggregate wants a word nobody else uses
    (maya,) = pottery(shared)  # Theo's one turn is not a 2-3 turn aggregate of his own
    assert maya.question == "What has Maya mentioned about pottery?"
    assert maya.turn_ids == ("D1:1", "D2:1")
    # without Theo's turn the shared aggregate asks nothing of pottery; keyword ones follow
    alone = shared.write(topic_statements(), ["multi_hop"], 10, random.Random(0))
    assert [d.question for d in alone] == ["What has Maya mentioned about pottery?"]
    assert SynthesisSettings.from_params({"aggregate": "shared"}).aggregate == "shared"


def test_topic_style_temporal_asks_when_with_the_resolved_date_as_answer():
    statements = statements_from_facts(facts())
    writer = HeuristicQuestionWriter(question_style="topic")
    drafts = writer.write(statements, ["temporal"], 10, random.Random(0))
    gym = next(d for d in drafts if d.turn_ids == ("D1:1",))
    assert gym.question.startswith("When did Maya mention ")
    assert gym.answer == "February 2023"
    assert "february" not in gym.question.lower()


def test_types_are_interleaved_so_a_per_memory_cap_keeps_every_type():
    drafts = HeuristicQuestionWriter().write(
        statements_from_facts(facts()), ["single_hop", "temporal"], 10, random.Random(0)
    )
    assert [d.qa_type for d in drafts[:2]] == ["single_hop", "temporal"]


def test_settings_reject_an_unknown_question_style():
    with pytest.raises(ConfigError, match="question_style"):
        SynthesisSettings.from_params({"question_style": "riddle"})
    assert SynthesisSettings.from_params({"question_style": "topic"}).question_style == "topic"


def test_the_synthesize_node_passes_the_question_style_to_the_heuristic_writer():
    from mera_pipelines.core.records import to_frame
    from mera_pipelines.pipelines.synthesize.nodes import synthesize_training_questions

    frame, summary, _ = synthesize_training_questions(
        to_frame(turns(), Turn),
        to_frame(facts(), Fact),
        [],
        {"train_memory_ids": ["m1"]},
        None,
        {"question_style": "topic", "types": ["single_hop", "temporal"]},
    )
    assert summary["questions"] == len(frame) > 0
    assert all(q.startswith(("What did ", "When did ")) for q in frame["question"])


def test_the_synthesize_node_passes_topic_words_to_the_heuristic_writer(monkeypatch):
    from mera_pipelines.core.records import to_frame
    from mera_pipelines.pipelines.synthesize import nodes

    made = {}

    def spy(kind, backend=None, **options):
        made.update(options)
        return HeuristicQuestionWriter(**options)

    monkeypatch.setattr(nodes, "make_question_writer", spy)
    nodes.synthesize_training_questions(
        to_frame(turns(), Turn),
        to_frame(facts(), Fact),
        [],
        {"train_memory_ids": ["m1"]},
        None,
        {"question_style": "topic", "topic_words": "common"},
    )
    assert made["topic_words"] == "common"


class CategoryEmbedder:
    """A fake sentence embedder: each category description is its own axis; a text naming a
    pet lies on the pets axis, any other text on a spare axis (near no category)."""

    PET_WORDS = {"dog", "cat", "puppy", "kitten"}

    def __init__(self) -> None:
        self.descriptions = [c.description for c in CATEGORIES]
        self.dim = len(self.descriptions) + 1
        self.pets = next(i for i, c in enumerate(CATEGORIES) if c.name == "pets")

    def embed(self, texts: list[str], *, progress: bool = False) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            if text in self.descriptions:
                out[row, self.descriptions.index(text)] = 1.0
            elif set(tokenize(text)) & self.PET_WORDS:
                out[row, self.pets] = 1.0
            else:
                out[row, -1] = 1.0
        return out


def pet_statements() -> list[Statement]:
    texts = [
        ("D1:4", "Nate", "Nate adopted a dog named Max from the shelter."),
        ("D1:6", "Nate", "Nate bought Max's dog bed in the same week."),  # same session as D1:4
        ("D3:2", "Nate", "Nate's cat Luna sleeps on the turtle tank all day."),
        ("D4:1", "Nate", "Nate watched the tournament final with Joanna."),  # not about pets
        ("D2:5", "Joanna", "Joanna is allergic to dog hair, sadly."),  # the other speaker
        ("D5:3", "Nate", "That cat video was hilarious!"),  # does not name its speaker
    ]
    return [Statement("m1", text, (tid,), speaker, TIME, "fact") for tid, speaker, text in texts]


def test_category_aggregate_asks_about_a_category_whose_evidence_names_its_instances():
    writer = HeuristicQuestionWriter(
        question_style="topic", aggregate="category", embedder=CategoryEmbedder()
    )
    drafts = writer._category_aggregate(pet_statements())
    assert len(drafts) == 1
    pets = drafts[0]
    assert pets.question == "What pets does Nate have at home?"
    assert category_of(pets.question) == "pets"
    assert category_of("What has Maya mentioned about pottery?") is None
    assert pets.qa_type == "multi_hop"
    # one statement per session, about Nate by name: D1:6 shares D1:4's session, D2:5 is
    # Joanna's, D5:3 does not name Nate, D4:1 is about no category
    assert set(pets.turn_ids) == {"D1:4", "D3:2"}
    # the answer: each statement's keyword nearest the category, none of the question's words
    assert set(pets.answer.split(", ")) == {"dog", "cat"}


def test_category_aggregate_needs_two_sessions():
    writer = HeuristicQuestionWriter(
        question_style="topic", aggregate="category", embedder=CategoryEmbedder()
    )
    one_session = [s for s in pet_statements() if s.turn_ids[0].startswith("D1:")]
    assert writer._category_aggregate(one_session) == []


def test_category_aggregates_come_before_keyword_ones_among_multi_hop_questions():
    writer = HeuristicQuestionWriter(
        question_style="topic", aggregate="category", embedder=CategoryEmbedder()
    )
    statements = pet_statements() + topic_statements()
    drafts = writer.write(statements, ["multi_hop"], 10, random.Random(0))
    assert drafts[0].question == "What pets does Nate have at home?"
    assert "What has Maya mentioned about pottery?" in [d.question for d in drafts]


def test_category_aggregate_needs_an_embedder_and_a_known_aggregate():
    with pytest.raises(ConfigError, match="embedder"):
        HeuristicQuestionWriter(question_style="topic", aggregate="category")
    with pytest.raises(ConfigError, match="aggregate"):
        SynthesisSettings.from_params({"aggregate": "cluster"})


def test_every_category_question_passes_the_grounding_length_check():
    # grounding rejects questions with fewer than 3 content words
    for category in CATEGORIES:
        question = category.question.format(speaker="Nate")
        assert len(content_words(question)) >= 3, question


def test_the_synthesize_node_hands_the_memorys_embedder_to_category_aggregates():
    from types import SimpleNamespace

    from mera_pipelines.core.records import to_frame
    from mera_pipelines.pipelines.synthesize.nodes import synthesize_training_questions

    pet_turns = [
        Turn(
            "m1", "s", int(s.turn_ids[0][1]), s.turn_ids[0], i, s.speaker, s.text, session_time=TIME
        )
        for i, s in enumerate(pet_statements())
    ]
    pet_facts = [
        Fact(f"m1|{t.turn_id}|0", "m1", t.turn_id, t.text, [], [], t.speaker, TIME, [t.text])
        for t in pet_turns
    ]
    frame, summary, _ = synthesize_training_questions(
        to_frame(pet_turns, Turn),
        to_frame(pet_facts, Fact),
        [],
        {"train_memory_ids": ["m1"]},
        None,
        {"question_style": "topic", "aggregate": "category", "types": ["multi_hop"]},
        SimpleNamespace(embedder=CategoryEmbedder()),
    )
    assert "What pets does Nate have at home?" in list(frame["question"])


def source_questions() -> list[Question]:
    def question(number: int, memory_id: str, category: str, gold: list[str], **extra):
        return Question(
            f"{memory_id}/q{number}",
            memory_id,
            f"Question {number}?",
            "an answer",
            category,
            gold,
            **extra,
        )

    return [
        question(0, "m1", "4", ["D1:1"]),
        question(1, "m1", "1", ["D1:3", "D2:2"]),
        question(2, "m1", "2", ["D2:1"]),
        question(3, "m1", "5", ["D1:2"], is_abstention=True),  # nothing to recover
        question(4, "m1", "4", []),  # no evidence
        question(5, "m1", "4", ["D9:9"]),  # evidence the memory does not hold
        question(6, "m1", "3", ["D1:2"]),
        question(0, "m2", "4", ["D1:1"]),  # not a training memory
    ]


def test_annotated_questions_keep_the_training_memories_questions_with_retrievable_evidence():
    settings = SynthesisSettings.from_params(
        {"writer": "annotated", "annotated_categories": [1, 2, 4]}
    )
    kept, report = annotated_questions(["m1"], source_questions(), facts(), settings)
    assert [q.question_id for q in kept] == ["m1/q0", "m1/q1", "m1/q2"]
    assert report.rejected == {
        "category_not_used": 2,  # the abstention (5) and the open-domain one (3)
        "no_evidence": 1,
        "evidence_not_in_memory": 1,
    }
    assert report.as_dict()["questions_by_type"] == {"4": 1, "1": 1, "2": 1}


def test_annotated_questions_count_abstentions_of_a_used_category():
    settings = SynthesisSettings.from_params({"writer": "annotated", "annotated_categories": ["5"]})
    kept, report = annotated_questions(["m1"], source_questions(), facts(), settings)
    assert kept == [] and report.rejected["abstention"] == 1


def test_annotated_questions_per_memory_cap_is_a_seeded_draw():
    settings = SynthesisSettings.from_params({"writer": "annotated", "max_per_memory": 2})
    first, _ = annotated_questions(["m1"], source_questions(), facts(), settings)
    again, _ = annotated_questions(["m1"], source_questions(), facts(), settings)
    assert len(first) == 2 and first == again
    assert {q.question_id for q in first} <= {"m1/q0", "m1/q1", "m1/q2", "m1/q6"}


def test_the_synthesize_node_uses_the_sources_questions_with_the_annotated_writer():
    from mera_pipelines.core.records import to_frame
    from mera_pipelines.pipelines.synthesize.nodes import synthesize_training_questions

    args = (to_frame(turns(), Turn), to_frame(facts(), Fact), [], {"train_memory_ids": ["m1"]})
    frame, summary, metrics = synthesize_training_questions(
        *args, None, {"writer": "annotated"}, None, to_frame(source_questions(), Question)
    )
    assert sorted(frame["question_id"]) == ["m1/q0", "m1/q1", "m1/q2", "m1/q6"]
    assert summary["writer"] == "annotated" and summary["rejected"] == 3
    assert metrics["synthesis.questions"]["value"] == 4.0
    with pytest.raises(ConfigError, match=r"annotated.*no annotated questions"):
        synthesize_training_questions(
            *args, None, {"writer": "annotated"}, None, to_frame(source_questions()[3:6], Question)
        )


def test_settings_reject_an_unknown_writer():
    with pytest.raises(ConfigError, match="writer 'poet' unknown"):
        SynthesisSettings.from_params({"writer": "poet"})
