"""Scoring: LoCoMo's official F1 (computed by hand here), recall by round, aggregation, attribution."""

import pytest

from mera_pipelines.core.errors import ConfigError
from mera_pipelines.core.metrics import (
    NO_JUDGE,
    QuestionResult,
    abstains,
    accepted_recall_by_round,
    aggregate_system,
    answer_f1,
    attribute_failure,
    is_wrong,
    locomo_f1,
    normalize_answer,
    padded_mean_by_round,
    porter_stem,
    question_result,
    recall_by_round,
    role_tokens,
    token_f1,
)
from mera_pipelines.core.records import Question, RoleUsage, RoundLog, Trajectory

# ---- token F1 ------------------------------------------------------------------------------


def test_normalize_answer_follows_locomo():
    # commas gone, lowercase, punctuation gone, a/an/the/and gone, whitespace collapsed
    assert normalize_answer("The cat, and a dog!") == "cat dog"
    assert normalize_answer("Mel's  self-care (daily).") == "mels selfcare daily"
    assert normalize_answer("Andy and Anna") == "andy anna"  # only whole words are dropped


@pytest.mark.parametrize(
    ("word", "stem"),
    # expected values from nltk.stem.PorterStemmer (NLTK_EXTENSIONS mode)
    [
        ("running", "run"),
        ("flies", "fli"),
        ("dies", "die"),
        ("generously", "gener"),
        ("happiness", "happi"),
        ("relational", "relat"),
        ("skies", "sky"),
        ("news", "news"),
        ("agreed", "agre"),
        ("hopping", "hop"),
        ("filing", "file"),
        ("conditional", "condit"),
        ("hopeful", "hope"),
        ("controlling", "control"),
        ("dying", "die"),
        ("paintings", "paint"),
        ("caresses", "caress"),
        ("ponies", "poni"),
        ("is", "is"),
    ],
)
def test_porter_stem_matches_nltk(word, stem):
    assert porter_stem(word) == stem


def test_token_f1_by_hand():
    # pred tokens: went to pari in may; gold: pari in may 2023 -> 3 common
    # P = 3/5, R = 3/4, F1 = 2 * 0.6 * 0.75 / 1.35
    assert token_f1("went to Paris in May", "Paris in May 2023") == pytest.approx(2 / 3)
    assert token_f1("painting", "paint") == 1.0  # stemming
    assert token_f1("The sunset!", "sunset") == 1.0  # article and punctuation
    assert token_f1("", "sunset") == 0.0
    assert token_f1("sunrise", "sunset") == 0.0
    # repeated tokens count once per occurrence on both sides (bag of tokens)
    assert token_f1("dog dog", "dog") == pytest.approx(2 * 0.5 * 1 / 1.5)


def test_category_1_splits_on_commas_and_averages_over_gold_parts():
    gold = "pottery, camping, painting, swimming"
    assert locomo_f1("pottery, camping", gold, "1") == pytest.approx(0.5)
    assert locomo_f1("camping, pottery, painting, swimming", gold, "1") == 1.0
    # without the split, one long prediction part shares little with each gold part
    # "pottery camping" vs "pottery": P=1/2, R=1 -> 2/3 for two parts, 0 for two
    assert locomo_f1("pottery camping", gold, "1") == pytest.approx((2 / 3 + 2 / 3) / 4)


def test_category_3_cuts_gold_at_the_first_semicolon():
    gold = "Likely no; though she likes reading, she wants to be a counselor"
    assert locomo_f1("likely no", gold, "3") == 1.0
    assert locomo_f1("likely no", gold, "4") < 0.5  # the whole gold when not category 3


def test_categories_2_and_4_are_plain_f1():
    assert locomo_f1("7 May 2023", "7 May 2023", 2) == 1.0
    assert locomo_f1("May 2023", "7 May 2023", "4") == pytest.approx(0.8)


@pytest.mark.parametrize(
    ("prediction", "score"),
    [
        ("Not mentioned in the conversation.", 1.0),
        ("That was not mentioned.", 1.0),
        ("No information available", 1.0),
        ("She went to Paris", 0.0),
        ("I don't know", 0.0),  # the official check knows only its two phrases
    ],
)
def test_category_5_is_the_official_not_mentioned_check(prediction, score):
    assert locomo_f1(prediction, "Not mentioned in the conversation", "5") == score


def test_answer_f1_dispatches_by_dataset():
    assert answer_f1("pottery, camping", "pottery, camping", "1", "locomo") == 1.0
    # LongMemEval: plain F1, even with commas
    assert answer_f1(
        "25 minutes", "25 minutes and 50 seconds", "knowledge-update", "longmemeval"
    ) == (pytest.approx(2 * 1 * 0.5 / 1.5))
    assert (
        answer_f1(
            "The information is not provided.", "n/a", "temporal-reasoning", "longmemeval", True
        )
        == 1.0
    )
    assert (
        answer_f1("You bought three cows first.", "n/a", "temporal-reasoning", "jsonl", True) == 0.0
    )
    with pytest.raises(ConfigError, match="Unknown dataset"):
        answer_f1("a", "a", "1", "squad")


def test_abstains_recognises_common_refusals():
    assert abstains("The conversation does not mention it.")
    assert abstains("I don't know.")
    assert abstains("There is not enough information to tell.")
    assert not abstains("She adopted a dog in 2021.")


# ---- recall by round -----------------------------------------------------------------------


def round_log(n, retrieved, accepted, usage=None):
    return RoundLog(
        round=n,
        intents=[],
        queries=[],
        retrieved_turn_ids=retrieved,
        accepted_turn_ids=accepted,
        graph_nodes=0,
        graph_relations=0,
        sufficient=False,
        usage=usage or {},
    )


def trajectory(rounds, termination="sufficient", answer="x", *, usage=None, seconds=1.0):
    viewed = [t for r in rounds for t in r.retrieved_turn_ids]
    accepted = [t for r in rounds for t in r.accepted_turn_ids]
    return Trajectory(
        question_id="q",
        memory_id="m",
        system="mera",
        rounds=rounds,
        termination=termination,
        answer=answer,
        viewed_turn_ids=viewed,
        accepted_turn_ids=accepted,
        usage=usage or {},
        seconds=seconds,
    )


def test_recall_by_round_is_cumulative_over_retrieved_and_accepted_turns():
    run = trajectory(
        [
            round_log(1, ["D1:1", "D1:2"], ["D1:1"]),
            round_log(2, ["D2:1"], []),
            round_log(3, ["D3:3", "D1:1"], ["D2:1"]),
        ]
    )
    gold = {"D1:1", "D2:1", "D9:9"}
    assert recall_by_round(run, gold) == pytest.approx([1 / 3, 2 / 3, 2 / 3])
    assert accepted_recall_by_round(run, gold) == pytest.approx([1 / 3, 1 / 3, 2 / 3])
    assert recall_by_round(run, set()) == []  # nothing to recall


def test_a_trajectory_without_rounds_counts_its_viewed_turns_as_one_round():
    run = trajectory([], termination="single_shot")
    run.viewed_turn_ids = ["D1:1", "D1:2"]
    assert recall_by_round(run, {"D1:2", "D5:5"}) == [0.5]


def test_role_tokens_never_count_a_role_twice():
    usage = {"planner": RoleUsage(tokens_in=10, tokens_out=2)}
    run = trajectory(
        [round_log(1, [], [], usage), round_log(2, [], [], usage)],
        usage={"answerer": RoleUsage(tokens_in=100, tokens_out=5)},
    )
    assert role_tokens(run) == {"answerer": {"in": 100, "out": 5}, "planner": {"in": 20, "out": 4}}
    # a trajectory-level total wins over the per-round numbers of the same role
    run.usage["planner"] = RoleUsage(tokens_in=20, tokens_out=4)
    assert role_tokens(run)["planner"] == {"in": 20, "out": 4}


# ---- aggregation ---------------------------------------------------------------------------


def row(**overrides):
    values = {
        "question_id": "q",
        "memory_id": "m",
        "system": "mera",
        "category": "4",
        "is_abstention": False,
        "gold_turn_ids": ["D1:1"],
        "answer": "a",
        "gold_answer": "a",
        "f1": 1.0,
        "judged_correct": None,
        "recall_by_round": [1.0],
        "accepted_recall_by_round": [1.0],
        "rounds": 1,
        "turns_viewed": 8,
        "termination": "sufficient",
        "tokens_in": 0,
        "tokens_out": 0,
        "tokens_by_role": {},
        "seconds": 1.0,
    }
    values.update(overrides)
    return QuestionResult(**values)


def hand_rows():
    return [
        # stopped after 2 rounds: keeps its final recall for round 3
        row(
            question_id="a",
            category="1",
            f1=0.5,
            recall_by_round=[0.5, 1.0],
            accepted_recall_by_round=[0.5, 0.5],
            rounds=2,
            turns_viewed=16,
            tokens_in=100,
            tokens_out=10,
            tokens_by_role={"planner": {"in": 60, "out": 6}, "answerer": {"in": 40, "out": 4}},
            seconds=2.0,
        ),
        row(
            question_id="b",
            category="2",
            f1=0.0,
            recall_by_round=[0.0, 0.0, 0.5],
            accepted_recall_by_round=[0.0, 0.0, 0.0],
            rounds=3,
            turns_viewed=24,
            termination="max_rounds",
            tokens_in=50,
            tokens_out=5,
            tokens_by_role={"planner": {"in": 50, "out": 5}},
            seconds=4.0,
            failure="retrieval_failure",
        ),
        # abstention: scored, but left out of recall although its recall is perfect
        row(
            question_id="c",
            category="5",
            is_abstention=True,
            recall_by_round=[1.0, 1.0, 1.0, 1.0],
            accepted_recall_by_round=[1.0, 1.0, 1.0, 1.0],
            rounds=4,
            turns_viewed=32,
            termination="max_rounds",
            seconds=6.0,
        ),
        # no gold evidence: left out of recall
        row(
            question_id="d",
            category="2",
            f1=0.5,
            gold_turn_ids=[],
            recall_by_round=[],
            accepted_recall_by_round=[],
            rounds=1,
            turns_viewed=8,
            termination="exhausted",
            seconds=0.0,
        ),
    ]


def test_aggregate_pads_recall_and_excludes_abstention_and_no_gold():
    metrics = aggregate_system(hand_rows())
    assert metrics["n_questions"] == 4
    assert metrics["n_recall_questions"] == 2
    # rounds: a = [0.5, 1.0, 1.0 (padded)], b = [0.0, 0.0, 0.5]
    assert metrics["evidence_recall_by_round"] == pytest.approx([0.25, 0.5, 0.75])
    assert metrics["round1_recall"] == pytest.approx(0.25)
    assert metrics["evidence_recall_final"] == pytest.approx(0.75)
    assert metrics["accepted_recall_by_round"] == pytest.approx([0.25, 0.25, 0.25])
    assert metrics["accepted_recall_final"] == pytest.approx(0.25)
    assert metrics["termination"] == {"exhausted": 0.25, "max_rounds": 0.5, "sufficient": 0.25}
    assert metrics["mean_rounds"] == pytest.approx(2.5)
    assert metrics["mean_turns_viewed"] == pytest.approx(20.0)
    assert metrics["f1"] == pytest.approx((0.5 + 0.0 + 1.0 + 0.5) / 4)
    assert metrics["seconds_per_question"] == pytest.approx(3.0)
    assert metrics["failure_attribution"] == {"retrieval_failure": 1}


def test_aggregate_without_judge_has_null_accuracy_and_says_so():
    metrics = aggregate_system(hand_rows())
    assert metrics["accuracy"] is None
    assert metrics["judge"] == NO_JUDGE == "none (token F1 only)"
    assert metrics["n_judged"] == 0


def test_aggregate_accuracy_over_judged_questions_only():
    rows = hand_rows()
    rows[0].judged_correct = True
    rows[1].judged_correct = False
    rows[3].judged_correct = None
    rows[3].judge_error = "LLMCallError: timeout"  # a failure, not a wrong answer
    rows[2].judged_correct = None  # category 5: excluded by the judge
    metrics = aggregate_system(rows, judge="llm:stub-model")
    assert metrics["accuracy"] == pytest.approx(0.5)
    assert metrics["judge"] == "llm:stub-model"
    assert metrics["n_judged"] == 2
    assert metrics["judge_failures"] == 1


def test_aggregate_by_category_and_tokens():
    metrics = aggregate_system(hand_rows())
    by_category = metrics["by_category"]
    assert list(by_category) == ["1", "2", "5"]
    assert by_category["2"]["n"] == 2
    assert by_category["2"]["f1"] == pytest.approx(0.25)
    assert by_category["2"]["accuracy"] is None
    assert by_category["2"]["evidence_recall_final"] == pytest.approx(0.5)  # only b has gold
    assert by_category["5"]["evidence_recall_final"] is None
    tokens = metrics["tokens_online_per_question"]
    assert tokens["in"] == pytest.approx(150 / 4)
    assert tokens["out"] == pytest.approx(15 / 4)
    assert tokens["by_role"]["planner"] == {
        "in": pytest.approx(110 / 4),
        "out": pytest.approx(11 / 4),
    }
    assert tokens["by_role"]["answerer"] == {"in": pytest.approx(10.0), "out": pytest.approx(1.0)}


def test_aggregate_of_nothing_is_empty_not_an_error():
    metrics = aggregate_system([])
    assert metrics["n_questions"] == 0
    assert metrics["f1"] is None and metrics["evidence_recall_by_round"] == []
    assert metrics["round1_recall"] is None and metrics["termination"] == {}


def test_padded_mean_keeps_the_last_value_of_short_curves():
    assert padded_mean_by_round([[0.2], [0.0, 0.4, 0.8]]) == pytest.approx([0.1, 0.3, 0.5])
    assert padded_mean_by_round([[], []]) == []


# ---- question rows and failure attribution --------------------------------------------------


def question(
    gold_turns=("D1:1", "D2:1"), answer="pottery, camping", category="1", abstention=False
):
    return Question(
        question_id="q",
        memory_id="m",
        question="What does Mel do?",
        answer=answer,
        category=category,
        gold_turn_ids=list(gold_turns),
        is_abstention=abstention,
    )


def test_question_result_collects_the_row():
    usage = {"planner": RoleUsage(tokens_in=10, tokens_out=3)}
    run = trajectory(
        [round_log(1, ["D1:1", "D3:1"], ["D1:1"], usage), round_log(2, ["D2:1"], ["D2:1"], usage)],
        answer="pottery, camping",
        usage={"answerer": RoleUsage(tokens_in=50, tokens_out=4)},
        seconds=2.5,
    )
    result = question_result(question(), run, f1=1.0, judged_correct=True, judge_label="CORRECT")
    assert result.recall_by_round == [0.5, 1.0]
    assert result.accepted_recall_by_round == [0.5, 1.0]
    assert (result.rounds, result.turns_viewed) == (2, 3)
    assert (result.tokens_in, result.tokens_out) == (70, 10)
    assert result.tokens_by_role["answerer"] == {"in": 50, "out": 4}
    assert result.failure is None and result.has_recall
    assert result.as_dict()["judge_label"] == "CORRECT"


def test_wrong_means_judge_wrong_or_low_f1_without_verdict():
    assert is_wrong(row(f1=1.0, judged_correct=False))
    assert not is_wrong(row(f1=0.0, judged_correct=True))
    assert is_wrong(row(f1=0.4, judged_correct=None))
    assert not is_wrong(row(f1=0.5, judged_correct=None))


def attribute(run, q=None, f1=0.0, judged=None, max_rounds=None):
    return question_result(q or question(), run, f1, judged, max_rounds=max_rounds).failure


def test_gold_never_viewed_after_stopping_early_is_a_premature_stop():
    run = trajectory([round_log(1, ["D1:1"], ["D1:1"])], termination="sufficient")
    assert attribute(run, max_rounds=10) == "premature_stop"
    exhausted = trajectory([round_log(1, ["D1:1"], ["D1:1"])], termination="exhausted")
    assert attribute(exhausted) == "premature_stop"  # unknown T_max counts as rounds left


def test_gold_never_viewed_otherwise_is_a_retrieval_failure():
    capped = trajectory([round_log(1, ["D1:1"], ["D1:1"])] * 2, termination="max_rounds")
    assert attribute(capped, max_rounds=2) == "retrieval_failure"
    # sufficient, but on the very last allowed round: no round was left
    last = trajectory([round_log(1, ["D1:1"], [])] * 2, termination="sufficient")
    assert attribute(last, max_rounds=2) == "retrieval_failure"
    single = trajectory(
        [round_log(1, ["D1:1", "D5:5"], ["D1:1", "D5:5"])], termination="single_shot"
    )
    assert attribute(single) == "retrieval_failure"


def test_gold_viewed_but_rejected_is_a_verifier_rejection():
    run = trajectory([round_log(1, ["D1:1", "D2:1"], ["D1:1"])])
    assert attribute(run) == "verifier_rejection"


def test_all_gold_accepted_and_answer_wrong_is_a_reasoning_error():
    run = trajectory([round_log(1, ["D1:1", "D2:1"], ["D1:1", "D2:1"])], answer="swimming")
    assert attribute(run, f1=0.0) == "reasoning_error"
    # a judge's WRONG overrides a good-looking F1
    assert attribute(run, f1=0.9, judged=False) == "reasoning_error"


def test_some_parts_of_a_multi_part_answer_missing_is_incomplete():
    run = trajectory([round_log(1, ["D1:1", "D2:1"], ["D1:1", "D2:1"])], answer="pottery")
    assert attribute(run, f1=0.4) == "incomplete_answer"
    single_gold = question(answer="by carving out some me-time each day", category="4")
    assert attribute(run, q=single_gold, f1=0.3) == "incomplete_answer"


def test_right_answers_and_special_questions():
    run = trajectory([round_log(1, ["D1:1", "D2:1"], ["D1:1", "D2:1"])])
    assert attribute(run, f1=1.0) is None
    abstention = question(category="5", abstention=True, answer="Not mentioned in the conversation")
    assert attribute(run, q=abstention, f1=0.0) == "reasoning_error"
    no_gold = question(gold_turns=())
    assert attribute(run, q=no_gold, f1=0.0) == "unattributed"


def test_attribute_failure_is_callable_on_a_row():
    run = trajectory([round_log(1, [], [])], termination="max_rounds")
    assert attribute_failure(row(f1=0.0, gold_turn_ids=["D1:1"]), run) == "retrieval_failure"
