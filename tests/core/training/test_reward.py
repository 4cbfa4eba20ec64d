"""The retrieval reward with hand-computed values, and the format penalties."""

from __future__ import annotations

import json

import pytest

from mera_pipelines.core.training.reward import (
    RewardSettings,
    gold_progress,
    parse_plan_output,
    plan_is_clean,
    retrieval_reward,
    total_reward,
)

SETTINGS = RewardSettings()


@pytest.mark.parametrize(
    ("recovered", "found", "expected"),
    [
        (0.0, 0.0, 0.0),
        (0.0, 0.9, 0.0),
        (1.0, 0.0, 1.0),
        (1.0, 0.75, 1.0),  # everything recovered: no bonus beyond 1
        (0.5, 0.0, 0.5),
        (0.5, 0.5, 0.625),  # 0.5 * (1 + 0.5 * 0.5)
        (0.25, 0.8, 0.4),  # 0.25 * (1 + 0.8 * 0.75)
    ],
)
def test_retrieval_reward_hand_values(recovered, found, expected):
    assert retrieval_reward(recovered, found) == pytest.approx(expected)


def test_retrieval_reward_rejects_shares_outside_unit_interval():
    with pytest.raises(ValueError, match="recovered"):
        retrieval_reward(1.5, 0.0)


def test_gold_progress_counts_new_gold_turns_once():
    # gold a,b,c,d; a already viewed (found); the output hits b twice, a again, y (not gold)
    progress = gold_progress(["a", "b", "c", "d"], ["a", "x"], ["b", "b", "a", "y"])
    assert progress.found == {"a"}
    assert progress.missing == {"b", "c", "d"}
    assert progress.new_hits == {"b"}
    assert progress.recovered_share == pytest.approx(1 / 3)
    assert progress.found_share == pytest.approx(1 / 4)
    # R = 1/3 * (1 + 1/4 * 2/3) = 7/18
    assert retrieval_reward(progress.recovered_share, progress.found_share) == pytest.approx(7 / 18)


def test_nothing_missing_earns_nothing():
    progress = gold_progress(["a"], ["a"], ["a", "b"])
    assert progress.recovered_share == 0.0


def _plan(*intents) -> str:
    return json.dumps({"intents": list(intents)})


def test_clean_plan_has_no_penalty():
    plan = parse_plan_output(
        _plan({"desired_fact": "where Maya climbs", "entities": ["Maya"], "topics": ["hobbies"]}),
        SETTINGS,
    )
    assert not plan.parse_failed
    assert plan.penalty == 0.0
    assert [i.desired_fact for i in plan.intents] == ["where Maya climbs"]


def test_penalties_for_entities_intents_and_length():
    six_names = ["Ana", "Ben", "Cai", "Dov", "Eli", "Fay"]
    many_entities = {"desired_fact": "gym visits", "entities": six_names}  # 6 > 4: 2 extra
    too_short = {"desired_fact": "gym"}  # 1 distinct content word < 3
    fine = {"desired_fact": "Maya's sister", "entities": ["Lena"]}
    extra = {"desired_fact": "another intent beyond the limit"}
    plan = parse_plan_output(_plan(many_entities, too_short, fine, extra), SETTINGS)
    # 1 extra intent + 2 extra entities + 1 short query = 4 penalties
    assert plan.penalty == pytest.approx(4 * SETTINGS.penalty)
    assert len(plan.intents) == SETTINGS.max_intents
    assert len(plan.intents[0].entities) == SETTINGS.max_entities


@pytest.mark.parametrize(
    ("intent", "short"),
    [
        ({"desired_fact": "visit", "entities": ["visit"], "topics": ["visit"]}, True),  # 1 word
        ({"desired_fact": "visit Nate", "topics": ["visit"]}, True),  # 2 distinct words
        ({"desired_fact": "what was mentioned about Maria"}, True),  # stopwords do not count
        ({"desired_fact": "state Nate visit", "entities": ["Nate"]}, False),  # 3 distinct
    ],
)
def test_query_length_counts_distinct_content_words(intent, short):
    plan = parse_plan_output(_plan(intent), SETTINGS)
    assert plan.penalty == pytest.approx(SETTINGS.penalty if short else 0.0)


def test_too_long_query_counts_repeated_words_too():
    words = ["gym", "climbing", "Maya"] * 11  # 33 words > 30, only 3 distinct
    plan = parse_plan_output(_plan({"desired_fact": " ".join(words)}), SETTINGS)
    assert plan.penalty == pytest.approx(SETTINGS.penalty)


@pytest.mark.parametrize(
    ("intents", "missing"),
    [
        ([{"desired_fact": "What books has Tim read? books"}], 1),
        # a copy differing only in case and punctuation is one query
        ([{"desired_fact": "books read Tim"}, {"desired_fact": "Books, read Tim!"}], 1),
        # the heuristic's pair: the same content words, embedded differently
        ([{"desired_fact": "What books has Tim read?"}, {"desired_fact": "books read Tim"}], 0),
    ],
)
def test_min_intents_charges_each_missing_distinct_query(intents, missing):
    settings = RewardSettings(min_intents=2)
    plan = parse_plan_output(_plan(*intents), settings)
    assert plan.penalty == pytest.approx(missing * settings.penalty)
    assert parse_plan_output(_plan(*intents), SETTINGS).penalty == 0.0  # off by default


@pytest.mark.parametrize("min_intents", [0, 4])
def test_min_intents_must_fit_max_intents(min_intents):
    from mera_pipelines.core.errors import ConfigError

    with pytest.raises(ConfigError, match="min_intents"):
        RewardSettings.from_params({"min_intents": min_intents, "max_intents": 3})


def test_unparseable_output_gets_the_fixed_low_reward():
    plan = parse_plan_output("I think you should search for the gym", SETTINGS)
    assert plan.parse_failed
    assert total_reward(plan, None, SETTINGS) == SETTINGS.unparseable
    empty = parse_plan_output(_plan(), SETTINGS)
    assert empty.parse_failed


@pytest.mark.parametrize(
    "text",
    [
        # the sixteenth session's GRPO planner: the second intent's key misspelled
        '{"intents": [{"desired_fact": "Caroline becoming mom", "entities": ["Caroline"]}, '
        '{"desiredfact": "Caroline becoming mom", "entities": ["Caroline"]}]}',
        '[{"desired_fact": "Caroline becoming mom"}]',  # no "intents" object
        '{"intents": [{"desired_fact": ["Caroline", "mom"]}]}',  # not a string
        # the eighteenth session's GRPO seed 1 (step 70) crashed the reward on a bare word
        # starting with a non-ASCII letter: it is an unparseable reply, not an error
        '{"intents": [{"desired_fact": "Caroline mom", "entities": [ícone]}]}',
    ],
)
def test_output_the_deployed_planner_rejects_is_unparseable(text):
    # the planner's backend checks the reply against INTENTS_SCHEMA and rejects all of it
    plan = parse_plan_output(text, SETTINGS)
    assert plan.parse_failed
    assert plan.intents == []


CUT_OFF_PLAN = '{"intents": [{"desired_fact": "Maya climbing gym", "entit'


def test_json_cut_off_by_the_token_limit_is_unparseable():
    plan = parse_plan_output(CUT_OFF_PLAN, SETTINGS)
    assert plan.parse_failed and plan.cut_off
    assert plan.intents == []
    assert total_reward(plan, None, SETTINGS) == SETTINGS.unparseable


def test_the_deployed_planner_does_not_accept_a_cut_off_plan_as_it_is():
    # the reward's verdict must match the backend's: it re-asks a cut-off reply and plans with
    # the second answer, so the first is not what the trained planner's output is judged by
    from mera_pipelines.core.llm.json_repair import RawReply, complete_json_with_one_reask
    from mera_pipelines.core.roles.planner import INTENTS_SCHEMA

    whole = '{"intents": [{"desired_fact": "Maya climbing gym rope"}]}'
    replies = iter([RawReply(CUT_OFF_PLAN, 10, 96), RawReply(whole, 10, 12)])
    reply = complete_json_with_one_reask(
        lambda _messages: next(replies), [{"role": "user", "content": "plan"}], INTENTS_SCHEMA, "m"
    )
    assert reply.text == whole
    assert not parse_plan_output(whole, SETTINGS).parse_failed


def test_total_reward_subtracts_penalties():
    plan = parse_plan_output(_plan({"desired_fact": "gym"}), SETTINGS)
    progress = gold_progress(["a", "b"], [], ["a"])
    assert total_reward(plan, progress, SETTINGS) == pytest.approx(0.5 - SETTINGS.penalty)


def test_reward_settings_reject_unknown_keys():
    from mera_pipelines.core.errors import ConfigError

    with pytest.raises(ConfigError, match="Unknown reward settings"):
        RewardSettings.from_params({"bonus": 1})


@pytest.mark.parametrize(
    ("text", "clean"),
    [
        ('{"intents": [{"desired_fact": "Nate travel plans", "entities": ["Nate"]}]}', True),
        ('{"intents": []}', False),  # the teacher's "nothing left to ask": scored as unparseable
        ('{"intents": [{"desired_fact": "mentioned Maria"}]}', False),  # 2 content words
        ("I would search for the gym", False),
    ],
)
def test_a_clean_plan_parses_and_earns_no_penalty(text, clean):
    assert plan_is_clean(text, SETTINGS) is clean
