"""State collection on a small memory, completion scoring, the GRPO reward function, filtering."""

from __future__ import annotations

import json

import pytest

from mera_pipelines.core.errors import ConfigError
from mera_pipelines.core.loop import LoopSettings
from mera_pipelines.core.roles.planner import HeuristicPlanner, intents_to_json, parse_intents
from mera_pipelines.core.training.reward import RewardSettings
from mera_pipelines.core.training.rollouts import (
    RetrievalReward,
    complement_column,
    filter_states,
    score_completion,
)
from mera_pipelines.core.training.states import collect_states, prompted_planner, record_prompt
from mera_pipelines.core.training.trainers import planner_prompt_settings
from tests.core.test_loop import QUESTION, memory, roles  # noqa: F401 (fixtures)

LOOP_PARAMS = {
    "turns_first_round": 1,
    "turns_per_round": 1,
    "max_rounds": 4,
    "exhaustion_rounds": 4,
}
LOOP = LoopSettings(**LOOP_PARAMS)
REWARD = RewardSettings()


def plan(*queries: str) -> str:
    return json.dumps({"intents": [{"desired_fact": q} for q in queries]})


def test_one_state_per_planner_call_with_gold_and_found_turns(memory, roles):
    records, report = collect_states([QUESTION], memory, roles, LOOP, HeuristicPlanner())
    assert report.questions == 1 and not report.failed_questions
    assert [r.round_index for r in records] == list(range(1, len(records) + 1))
    assert report.states == len(records) >= 2  # one turn per round: the second hop needs more
    first, second = records[0], records[1]
    assert first.viewed_turn_ids == [] and first.found_turn_ids == []
    assert first.turn_budget == 1
    assert first.gold_turn_ids == QUESTION.gold_turn_ids
    assert len(second.viewed_turn_ids) == 1
    assert set(second.found_turn_ids) == set(second.viewed_turn_ids) & set(QUESTION.gold_turn_ids)
    assert second.query_history  # round 1's queries
    for record in records:
        assert parse_intents(json.loads(record.teacher_output))  # the SFT target parses
        state = record.planner_state()
        assert state.question == QUESTION.question and state.round_index == record.round_index


def test_score_completion_runs_the_loops_retrieval(memory):
    hit = score_completion(
        plan("Jonas dog Pepper vizsla"), "m", ["D1:1", "D2:1"], ["D1:1"], 2, memory, LOOP, REWARD
    )
    assert hit.retrieved_turn_ids == ["D2:1"]
    assert hit.recovered_share == 1.0 and hit.found_share == 0.5
    assert hit.reward == pytest.approx(1.0)
    miss = score_completion(
        plan("Theo cooked pasta dinner"), "m", ["D1:1", "D2:1"], ["D1:1"], 2, memory, LOOP, REWARD
    )
    assert miss.reward == 0.0 and miss.new_gold_hits == 0
    # a viewed turn is excluded: asking for it again finds something else, and earns nothing
    again = score_completion(
        plan("Maya met Jonas at the climbing gym"), "m", ["D1:1"], ["D1:1"], 2, memory, LOOP, REWARD
    )
    assert "D1:1" not in again.retrieved_turn_ids and again.reward == 0.0
    broken = score_completion("no json here", "m", ["D1:1"], [], 1, memory, LOOP, REWARD)
    assert broken.parse_failed and broken.reward == REWARD.unparseable


def test_a_complementing_plan_is_scored_with_the_heuristics_intents_after_its_own(memory):
    two_turns = LoopSettings(**{**LOOP_PARAMS, "turns_first_round": 2})
    gym = parse_intents({"desired_fact": "Maya met Jonas at the climbing gym"})
    pasta = plan("Theo cooked pasta dinner")

    alone = score_completion(pasta, "m", ["D1:1"], [], 1, memory, two_turns, REWARD)
    complemented = score_completion(
        pasta, "m", ["D1:1"], [], 1, memory, two_turns, REWARD, complement=gym
    )

    assert "D1:1" not in alone.retrieved_turn_ids and alone.reward == 0.0
    # the two queries' rankings merge into the round's two turns: one from each
    assert set(complemented.retrieved_turn_ids) == {"D1:1", "D3:1"}
    assert complemented.reward == pytest.approx(1.0)
    # an unparseable output stays unparseable: the heuristic's intents do not rescue it
    broken = score_completion("junk", "m", ["D1:1"], [], 1, memory, two_turns, REWARD, "", "", gym)
    assert broken.parse_failed and broken.reward == REWARD.unparseable

    # the GRPO reward reads the heuristic's plan for each row from the complement_plan column
    reward = RetrievalReward(memory, two_turns, REWARD)
    completion = [[{"role": "assistant", "content": pasta}]]
    columns = dict(memory_id=["m"], gold_turn_ids=[["D1:1"]], viewed_turn_ids=[[]])
    assert reward([[]], completion, **columns, round_index=[1]) == [0.0]
    assert reward(
        [[]], completion, **columns, round_index=[1], complement_plan=[intents_to_json(gym)]
    ) == [pytest.approx(1.0)]


def test_teacher_regret_charges_a_sample_what_the_teachers_plan_recovers_beyond_it(memory):
    weight = 0.5
    reward = RetrievalReward(memory, LOOP, RewardSettings(teacher_regret=weight))
    hit, miss = plan("Jonas dog Pepper vizsla"), plan("Theo cooked pasta dinner")
    texts = [hit, miss, "garbage"]
    logged = {}
    columns = dict(
        memory_id=["m"] * 3,
        gold_turn_ids=[["D1:1", "D2:1"]] * 3,
        viewed_turn_ids=[["D1:1"]] * 3,
        round_index=[2] * 3,
    )
    completions = [[{"role": "assistant", "content": t}] for t in texts]
    # the teacher recovers D2:1 (R_ret 1.0): the hit pays nothing, the miss and the
    # unparseable output pay weight x 1.0 on top, so failing to parse stays the worst
    values = reward(
        [[]] * 3, completions, **columns, teacher_plan=[hit] * 3, log_metric=logged.__setitem__
    )
    assert values == [
        pytest.approx(1.0),
        pytest.approx(-weight),
        pytest.approx(REWARD.unparseable - weight),
    ]
    assert logged["teacher_regret"] == pytest.approx(2 / 3)
    assert reward.below_teacher == 2
    # a teacher plan that misses charges nobody: a sample beating it earns only its own R_ret
    assert reward([[]] * 3, completions, **columns, teacher_plan=[miss] * 3) == [
        pytest.approx(1.0),
        0.0,
        REWARD.unparseable,
    ]
    with pytest.raises(ConfigError, match="teacher_plan"):
        reward([[]] * 3, completions, **columns)
    with pytest.raises(ConfigError, match="teacher_regret"):
        RewardSettings.from_params({"teacher_regret": -1})


def test_complement_column_holds_the_heuristic_plan_at_the_state(memory, roles):
    records, _ = collect_states([QUESTION], memory, roles, LOOP, HeuristicPlanner())
    for record in records:
        expected = HeuristicPlanner().plan(record.planner_state()).intents
        assert parse_intents(json.loads(complement_column(record))) == expected


@pytest.mark.parametrize("options", [{}, {"hints": True}, {"draft": True, "graph_chars": 40}])
def test_training_prompts_are_the_ones_the_trained_planner_is_evaluated_with(
    memory, roles, options
):
    records, _ = collect_states([QUESTION], memory, roles, LOOP, HeuristicPlanner())
    prompt = planner_prompt_settings({"prompt": options})
    evaluated = prompted_planner(backend=None, prompt=prompt)  # messages() never calls it
    plain = record_prompt(planner_prompt_settings({}))
    for record in records:
        assert record_prompt(prompt)(record) == evaluated.messages(record.planner_state())
    assert (record_prompt(prompt)(records[-1]) == plain(records[-1])) == (not options)


def test_reward_function_takes_trl_columns_and_logs_metrics(memory):
    reward = RetrievalReward(memory, LOOP, REWARD)
    logged = {}
    completions = [
        [{"role": "assistant", "content": plan("Jonas dog Pepper vizsla")}],
        [{"role": "assistant", "content": "garbage"}],
        [{"role": "assistant", "content": plan("Jonas dog Pepper vizsla")[:-12]}],  # cut off
        [{"role": "assistant", "content": plan()}],  # {"intents": []}: nothing to ask
    ]
    values = reward(
        prompts=[[{"role": "user", "content": "q"}]] * 4,
        completions=completions,
        memory_id=["m"] * 4,
        gold_turn_ids=[["D2:1"]] * 4,
        viewed_turn_ids=[[]] * 4,
        round_index=[2] * 4,
        log_metric=logged.__setitem__,
        trainer_state=None,
    )
    assert values == [pytest.approx(1.0), *[REWARD.unparseable] * 3]
    assert logged == {
        "recall_gained": pytest.approx(1 / 4),
        "parse_failure_rate": pytest.approx(3 / 4),
        "cut_off_rate": pytest.approx(1 / 4),
        "no_intent_rate": pytest.approx(1 / 4),
        "format_penalty": 0.0,
    }
    assert reward.completions == 4 and reward.parse_failures == 3
    assert reward.cut_off == 1 and reward.no_intent == 1
    assert reward.__name__ == "retrieval_reward"

    padded = [[{"role": "assistant", "content": plan("Pepper Pepper Pepper")}]]
    reward(padded, padded, ["m"], [["D2:1"]], [[]], [2], log_metric=logged.__setitem__)
    assert logged["format_penalty"] == pytest.approx(REWARD.penalty)  # 1 distinct word < 3


def test_filtering_keeps_only_states_whose_samples_disagree(memory, roles):
    records, _ = collect_states([QUESTION], memory, roles, LOOP, HeuristicPlanner())
    with_missing = [r for r in records if r.missing_turn_ids]
    assert with_missing
    samples = {
        # first state: samples disagree (one finds gold, one does not) -> retained
        with_missing[0].state_id: [plan("Maya met Jonas at the climbing gym"), plan("pasta")],
    }

    def sampler(record, n):
        return samples.get(record.state_id, [plan("Theo cooked pasta")[:-5], "junk"])[:n]

    retained, rollouts, report = filter_states(records, sampler, memory, LOOP, REWARD, 2)
    assert report.rollout_parse_failures == 2 * (len(with_missing) - 1)
    assert len(with_missing) > 1 and report.rollout_cut_off == len(with_missing) - 1  # cut off
    assert report.states_collected == len(records)
    assert report.states_into_filtering == len(with_missing)
    assert [r.state_id for r in retained] == [with_missing[0].state_id]
    assert report.dropped_all_zero == len(with_missing) - 1
    assert report.retained == 1 and report.rollouts == 2 * len(with_missing)
    assert len(rollouts) == report.rollouts
    row = report.table()[0]
    assert row["retained_pct"] == round(100 / len(with_missing), 1)
    assert report.rollout_no_intent == 0 and report.retained_format_only == 0


def test_filtering_counts_states_kept_only_for_their_unparseable_samples(memory, roles):
    records, _ = collect_states([QUESTION], memory, roles, LOOP, HeuristicPlanner())
    first = records[0]  # nothing viewed yet, gold D1:1 + D2:1; this plan finds D1:1
    second = type(first)(**{**vars(first), "state_id": "copy"})
    finds = plan("Maya met Jonas at the climbing gym")
    samples = {
        # parsed samples all recover the same: only the empty plan differs -> format only
        first.state_id: [finds, finds, plan()],
        # two parsed samples recover different shares: a search signal
        second.state_id: [finds, plan("pasta"), "junk"],
    }
    retained, rollouts, report = filter_states(
        [first, second], lambda r, n: samples[r.state_id], memory, LOOP, REWARD, 3
    )
    assert report.retained == 2 and report.retained_format_only == 1
    assert report.rollout_parse_failures == 2 and report.rollout_no_intent == 1
    assert [row["no_intent"] for row in rollouts] == [False, False, True, False, False, False]

    kept, _, dropping = filter_states(
        [first, second],
        lambda r, n: samples[r.state_id],
        memory,
        LOOP,
        REWARD,
        3,
        drop_format_only=True,
    )
    assert [r.state_id for r in kept] == [second.state_id]
    assert dropping.dropped_format_only == 1 and dropping.retained_format_only == 0


def test_filtering_drops_groups_that_all_recover_everything(memory, roles):
    records, _ = collect_states([QUESTION], memory, roles, LOOP, HeuristicPlanner())
    first = records[0]  # nothing viewed yet, gold D1:1 + D2:1; budget 1 turn
    record = type(first)(**{**vars(first), "turn_budget": 1, "gold_turn_ids": ["D1:1"]})
    complete = plan("Maya met Jonas at the climbing gym")
    _, _, report = filter_states([record], lambda r, n: [complete] * n, memory, LOOP, REWARD, 3)
    assert report.dropped_all_full == 1 and report.retained == 0


def test_filtering_disabled_keeps_every_state_with_missing_evidence(memory, roles):
    records, _ = collect_states([QUESTION], memory, roles, LOOP, HeuristicPlanner())

    def never(record, n):
        raise AssertionError("no sampling when filtering is off")

    retained, rollouts, report = filter_states(records, never, memory, LOOP, REWARD, 0)
    assert len(retained) == report.retained == sum(1 for r in records if r.missing_turn_ids)
    assert rollouts == []


def state_variants(memory, roles, count, changes):
    """``count`` copies ``s0``... of the first collected state, each missing gold turn D1:1,
    with ``changes(i)`` applied to the i-th."""
    records, _ = collect_states([QUESTION], memory, roles, LOOP, HeuristicPlanner())
    first = records[0]
    return [
        type(first)(**{**vars(first), "state_id": f"s{i}", "gold_turn_ids": ["D1:1"], **changes(i)})
        for i in range(count)
    ]


def test_a_state_cap_takes_the_states_the_teacher_falls_short_on_first(memory, roles):
    variants = state_variants(
        memory,
        roles,
        6,
        # the teacher finds D1:1 in the odd states and nothing in the even ones
        lambda i: {
            "teacher_output": plan("Maya met Jonas at the climbing gym" if i % 2 else "pasta")
        },
    )
    sampled = []

    def sampler(record, n):
        sampled.append(record.state_id)
        return [plan("pasta")] * n

    for prefer in (True, False):
        sampled.clear()
        _, _, report = filter_states(
            variants, sampler, memory, LOOP, REWARD, 2, max_states=3, prefer_teacher_short=prefer
        )
        assert report.teacher_short_states == 3 and report.states_into_filtering == 3
        short = {"s0", "s2", "s4"}
        assert (set(sampled) == short) is prefer


def test_collect_node_min_rounds_runs_the_teacher_past_a_sufficient_verdict(memory):
    from mera_pipelines.core.records import Question, to_frame
    from mera_pipelines.pipelines.collect.nodes import collect_planner_states

    # a single-hop question the heuristic verifier calls sufficient after round 1
    lena = Question("m/q1", "m", "Where does Maya's sister Lena live?", "Lisbon", "4", ["D2:2"])
    questions = to_frame([lena], Question)
    loop = {"max_rounds": 3, "exhaustion_rounds": 4}
    _, default_report, _ = collect_planner_states(questions, memory, None, {}, loop)
    deep = {"collect": {"min_rounds": 3}}
    table, deep_report, _ = collect_planner_states(questions, memory, None, deep, loop)
    assert default_report["mean_rounds"] == 1
    assert deep_report["mean_rounds"] == 3
    assert sorted(table["round_index"]) == [1, 2, 3]
    with pytest.raises(ConfigError, match="min_rounds"):
        collect_planner_states(questions, memory, None, {"collect": {"min_rounds": 0}}, loop)


def test_later_round_share_reserves_places_for_states_after_round_one(memory, roles):
    variants = state_variants(
        memory,
        roles,
        8,
        # s0 and s1 are later-round states
        lambda i: {"found_turn_ids": [], "round_index": 2 if i < 2 else 1},
    )

    def taken(share):
        sampled = []

        def sampler(record, n):
            sampled.append(record.state_id)
            return [plan("pasta")] * n

        filter_states(
            variants, sampler, memory, LOOP, REWARD, 2, max_states=4, later_round_share=share
        )
        return set(sampled)

    assert len(taken(None)) == 4 and not {"s0", "s1"} <= taken(None)  # seed 0's shuffle
    assert {"s0", "s1"} <= taken(0.5)  # ceil(0.5 * 4) = 2 places, both later states
    later = taken(0.25)
    assert len(later) == 4 and len(later & {"s0", "s1"}) >= 1
    assert taken(1.0) >= {"s0", "s1"} and len(taken(1.0)) == 4  # too few: the rest fill in
    with pytest.raises(ConfigError, match="later_round_share"):
        taken(1.5)


@pytest.fixture
def warm_start(memory, monkeypatch, tmp_path):
    """The SFT node over ``memory`` with trl's trainer replaced: returns (call, trained), where
    ``call(records, params, collect_report={})`` runs the node on the records and ``trained``
    lists the (prompt, plan) examples of each call."""
    from mera_pipelines.core.records import Question, to_frame
    from mera_pipelines.core.training.model_store import PlannerModel
    from mera_pipelines.core.training.states import PlannerStateRecord
    from mera_pipelines.pipelines.train_planner import nodes

    trained = []

    class Log:
        def summary(self):
            return {}

    def fake_sft(folder, examples, settings, threads, log_metrics):
        trained.append(examples)
        return tmp_path, Log()

    monkeypatch.setattr(nodes, "run_sft", fake_sft)
    base = PlannerModel(tmp_path, {"stage": "base"})

    def call(records, params, collect_report=None):
        states = to_frame(records, PlannerStateRecord)
        split = {"train_memory_ids": ["m"]}
        questions = to_frame([QUESTION], Question)
        return nodes.warm_start_planner(
            base, states, collect_report or {}, split, memory, questions, params, LOOP_PARAMS
        )

    return call, trained


def test_sft_can_skip_teacher_plans_the_reward_penalises(memory, roles, warm_start):
    call, trained = warm_start
    outputs = [
        plan("Maya met Jonas gym"),
        '{"intents": []}',
        plan("pasta"),
        plan("Jonas dog Pepper"),
    ]
    records = state_variants(memory, roles, 4, lambda i: {"teacher_output": outputs[i]})
    collected = {"teacher": "llm:teacher-model"}
    planner, report = call(records, {"sft": {}}, collected)
    assert [answer for _, answer in trained[-1]] == outputs
    assert report["skipped_penalised_plans"] == 0
    assert planner.metadata["sft"]["teacher"] == "llm:teacher-model"  # what it imitated
    _, report = call(records, {"sft": {"skip_penalised_plans": True}})
    assert report["teacher"] == "heuristic"  # a collect report from before the option
    # the empty plan is scored as unparseable and "pasta" is one word short of three
    assert [answer for _, answer in trained[-1]] == [outputs[0], outputs[3]]
    assert report["examples"] == 2 and report["skipped_penalised_plans"] == 2
    with pytest.raises(ConfigError, match="skip_penalised_plans"):
        call(records[1:3], {"sft": {"skip_penalised_plans": True}})


def test_sft_targets_add_each_differing_variant_plan_after_the_teachers(memory, roles):
    from mera_pipelines.core.roles.planner import intents_to_json
    from mera_pipelines.core.training.states import sft_targets

    records, _ = collect_states([QUESTION], memory, roles, LOOP, HeuristicPlanner())
    first = records[0]
    assert sft_targets(first) == [first.teacher_output]
    one_query = HeuristicPlanner(keyword_intent=False)
    no_topics = HeuristicPlanner(topic_labels=False)
    targets = sft_targets(first, [HeuristicPlanner(), one_query, one_query, no_topics])
    state = first.planner_state()
    expected = [intents_to_json(p.plan(state).intents) for p in (one_query, no_topics)]
    # the default heuristic repeats the teacher's plan and the second one_query its own: kept once
    assert targets == [first.teacher_output, *expected]
    assert len(json.loads(targets[1])["intents"]) == 1  # round 1 without the key-terms query

    class SaysNothing:
        name = "nothing"

        def plan(self, state):
            from mera_pipelines.core.roles.planner import PlanResult

            return PlanResult([])

    assert sft_targets(first, [SaysNothing()]) == [first.teacher_output]  # no empty plan


def test_sft_trains_on_variant_plans_beside_the_teachers(memory, roles, warm_start):
    call, trained = warm_start
    records, _ = collect_states([QUESTION], memory, roles, LOOP, HeuristicPlanner())
    params = {"sft": {"variant_targets": {"one_query": {"keyword_intent": False}}}}
    _, report = call(records[:1], params)
    (teacher_prompt, teacher_plan), (variant_prompt, variant_plan) = trained[-1]
    assert teacher_prompt == variant_prompt  # one prompt, two valid plans
    assert teacher_plan == records[0].teacher_output
    assert len(json.loads(variant_plan)["intents"]) == 1
    assert report["examples"] == 2 and report["variant_examples"] == 1
    assert report["target_choice"] == "all" and "best_reward" not in report
    for variants, message in [
        ({"typo": {"keyword_intents": False}}, r"variant_targets\.typo: .*keyword_intents"),
        ({"flat": "keyword_intent=false"}, r"variant_targets\.flat must be a mapping"),
        ([{"keyword_intent": False}], "must map a name"),
    ]:
        with pytest.raises(ConfigError, match=message):
            call(records[:1], {"sft": {"variant_targets": variants}})


def test_best_reward_targets_keep_the_teachers_plan_unless_a_variant_earns_more(memory, roles):
    from mera_pipelines.core.training.rollouts import best_reward_targets

    records = state_variants(memory, roles, 4, lambda i: {})  # round 1, D1:1 missing
    miss, hit = plan("Theo cooked pasta dinner"), plan("Maya met Jonas at the climbing gym")
    candidates = [
        [miss, hit, plan("Maya met Jonas at the gym")],  # ties go to the earlier plan
        [hit, miss],
        [miss, plan("Theo pasta dinner cooked")],  # both earn 0: the teacher's stays
        [plan("pasta"), miss],  # a one-word query's penalty: the variant wins, finding nothing
    ]
    chosen, report = best_reward_targets(records, candidates, memory, LOOP, REWARD)
    assert chosen == [hit, hit, miss, miss]
    assert report.states == 4 and report.variant_chosen == 2
    assert report.variant_recovers_more == 1
    assert report.mean_teacher_reward < 1 / 4  # the penalty
    assert report.mean_chosen_reward == pytest.approx(2 / 4)
    with pytest.raises(ValueError):
        best_reward_targets(records, candidates[:2], memory, LOOP, REWARD)


def test_sft_on_best_reward_targets_trains_one_plan_per_state(memory, roles, warm_start):
    from mera_pipelines.core.roles.planner import intents_to_json
    from mera_pipelines.core.training.rollouts import score_at_state

    call, trained = warm_start
    miss, hit = plan("Theo cooked pasta dinner"), plan("Maya met Jonas at the climbing gym")
    records = state_variants(memory, roles, 2, lambda i: {"teacher_output": [miss, hit][i]})
    one_query = {"keyword_intent": False}
    params = {"sft": {"variant_targets": {"one_query": one_query}, "target_choice": "best_reward"}}
    _, report = call(records, params)
    variant = intents_to_json(
        HeuristicPlanner(**one_query).plan(records[0].planner_state()).intents
    )

    def reward(text):
        return score_at_state(records[0], text, memory, LOOP, REWARD).reward

    assert reward(variant) > reward(miss)  # the question itself finds D1:1
    assert [answer for _, answer in trained[-1]] == [variant, hit]
    assert report["examples"] == 2 and report["variant_examples"] == 0
    assert report["best_reward"]["variant_chosen"] == 1
    with pytest.raises(ConfigError, match="set training.sft.variant_targets"):
        call(records, {"sft": {"target_choice": "best_reward"}})
    with pytest.raises(ConfigError, match="target_choice must be one of"):
        call(records, {"sft": {"target_choice": "best"}})
