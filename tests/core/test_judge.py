"""LLM judges against a real local OpenAI-compatible server: prompts, parsing, failures."""

import json

import pytest

from mera_pipelines.core.errors import ConfigError
from mera_pipelines.core.llm.openai_backend import OpenAIBackend
from mera_pipelines.core.records import Question
from mera_pipelines.core.roles.judge import (
    LoCoMoLLMJudge,
    LongMemEvalLLMJudge,
    longmemeval_prompt_key,
    make_judge,
    parse_correct_wrong,
    parse_yes_no,
)
from tests.support import openai_stub
from tests.support.openai_stub import Reply

stub_server = openai_stub.stub_server


def backend_for(server):
    return OpenAIBackend(
        "stub-model", base_url=server.base_url, api_key="k", timeout=2.0, max_retries=0
    )


def locomo_question(category="2", answer="7 May 2023", abstention=False):
    return Question(
        "conv-26_q3",
        "conv-26",
        "When did Caroline go to the LGBTQ support group?",
        answer,
        category,
        gold_turn_ids=["D1:3"],
        is_abstention=abstention,
    )


def lme_question(category, answer="Blue", abstention=False):
    return Question(
        "q9", "q9", "What color is my new car?", answer, category, is_abstention=abstention
    )


# ---- LoCoMo ---------------------------------------------------------------------------------


def test_locomo_judge_sends_question_gold_and_prediction_as_data(stub_server):
    stub_server.enqueue(
        Reply(
            json.dumps({"reasoning": "Same date, other format.", "label": "CORRECT"}),
            prompt_tokens=300,
            completion_tokens=20,
        )
    )
    judge = LoCoMoLLMJudge(backend_for(stub_server))
    assert judge.name == "llm:stub-model"

    result = judge.judge(locomo_question(), "May 7th, 2023")

    assert (result.correct, result.label, result.error) == (True, "CORRECT", None)
    assert (result.tokens_in, result.tokens_out) == (300, 20)
    (request,) = stub_server.chat_requests
    content = request.messages[-1]["content"]
    assert "<<<GOLD\n7 May 2023\nGOLD>>>" in content
    assert "<<<ANSWER\nMay 7th, 2023\nANSWER>>>" in content
    assert "QUESTION>>>" in content and "generous" in content
    assert '"label"' in content  # the JSON shape is asked for


def test_locomo_judge_reads_wrong_in_any_case(stub_server):
    stub_server.enqueue(Reply('{"reasoning": "different year", "label": "wrong"}'))
    result = LoCoMoLLMJudge(backend_for(stub_server)).judge(locomo_question(), "7 May 2022")
    assert (result.correct, result.label) == (False, "WRONG")


def test_locomo_judge_excludes_category_5_without_calling_the_model(stub_server):
    judge = LoCoMoLLMJudge(backend_for(stub_server))
    question = locomo_question("5", "Not mentioned in the conversation", abstention=True)
    result = judge.judge(question, "Not mentioned in the conversation.")
    assert (result.correct, result.label, result.error) == (None, "excluded", None)
    assert stub_server.chat_requests == []


def test_locomo_judge_failure_is_none_with_the_error(stub_server):
    stub_server.enqueue(Reply.server_error(500))
    result = LoCoMoLLMJudge(backend_for(stub_server)).judge(locomo_question(), "7 May 2023")
    assert (result.correct, result.label) == (None, "error")
    assert "LLMCallError" in result.error


def test_locomo_judge_without_a_usable_label_is_none_not_wrong(stub_server):
    stub_server.enqueue(Reply('{"reasoning": "hard to say", "label": "PARTIALLY"}'))
    result = LoCoMoLLMJudge(backend_for(stub_server)).judge(locomo_question(), "May")
    assert result.correct is None and result.label == "error"
    assert "no CORRECT/WRONG label" in result.error
    assert result.tokens_in > 0  # the call was made and is paid for


# ---- LongMemEval ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("category", "abstention", "phrase"),
    [
        ("single-session-user", False, "only part of the information"),
        ("multi-session", False, "only part of the information"),
        ("temporal-reasoning", False, "off by exactly one"),
        ("knowledge-update", False, "earlier, outdated information"),
        ("single-session-preference", False, "satisfies the rubric"),
        ("temporal-reasoning", True, "cannot be answered"),
    ],
)
def test_longmemeval_judge_uses_the_prompt_of_the_question_type(
    stub_server, category, abstention, phrase
):
    stub_server.enqueue(Reply("Yes.", prompt_tokens=90, completion_tokens=2))
    judge = LongMemEvalLLMJudge(backend_for(stub_server))
    result = judge.judge(lme_question(category, abstention=abstention), "Your car is blue.")
    assert (result.correct, result.label, result.tokens_in, result.tokens_out) == (
        True,
        "yes",
        90,
        2,
    )
    (request,) = stub_server.chat_requests
    content = request.messages[-1]["content"]
    assert phrase in content
    assert "<<<REFERENCE\nBlue\nREFERENCE>>>" in content
    assert "<<<RESPONSE\nYour car is blue.\nRESPONSE>>>" in content
    assert request.body["max_tokens"] == 16


def test_longmemeval_judge_no_and_unreadable_replies(stub_server):
    judge = LongMemEvalLLMJudge(backend_for(stub_server))
    stub_server.enqueue(Reply("no"), Reply("I am not sure."), Reply.server_error(503))
    assert judge.judge(lme_question("multi-session"), "Red").correct is False
    unreadable = judge.judge(lme_question("multi-session"), "Red")
    assert (unreadable.correct, unreadable.label) == (None, "error")
    assert "no yes/no" in unreadable.error
    failed = judge.judge(lme_question("multi-session"), "Red")
    assert failed.correct is None and "LLMCallError" in failed.error


def test_longmemeval_prompts_can_be_overridden_by_type_only():
    with pytest.raises(ConfigError, match="Unknown LongMemEval judge prompt"):
        LongMemEvalLLMJudge(_NamedBackend(), prompt_templates={"sports": "x"})


class _NamedBackend:
    model_name = "named"


@pytest.mark.parametrize(
    ("reply", "verdict"),
    [
        ("Yes", True),
        ("yes, the response names the car colour", True),
        ("No.", False),
        ("<think>yes or no? The answer differs.</think>\nNo", False),
        ("Not really", None),  # "not" is no "no"
        ("", None),
    ],
)
def test_parse_yes_no(reply, verdict):
    assert parse_yes_no(reply) is verdict


def test_parse_correct_wrong():
    assert parse_correct_wrong({"label": " Correct. "}) is True
    assert parse_correct_wrong({"label": "WRONG"}) is False
    assert parse_correct_wrong({"verdict": "CORRECT"}) is None
    assert parse_correct_wrong(["CORRECT"]) is None


def test_prompt_key_for_unknown_types_is_the_default():
    assert longmemeval_prompt_key(lme_question("uncategorized")) == "default"
    assert longmemeval_prompt_key(lme_question("knowledge-update", abstention=True)) == "abstention"


# ---- the factory ---------------------------------------------------------------------------


def test_make_judge():
    backend = _NamedBackend()
    assert make_judge("none") is None
    assert isinstance(make_judge("llm", backend, dataset="locomo"), LoCoMoLLMJudge)
    assert isinstance(make_judge("llm", backend, dataset="longmemeval"), LongMemEvalLLMJudge)
    assert isinstance(make_judge("llm", backend, dataset="jsonl"), LongMemEvalLLMJudge)
    assert make_judge("llm", backend, dataset="locomo", max_tokens=64).max_tokens == 64
    with pytest.raises(ConfigError, match="needs an LLM backend"):
        make_judge("llm")
    with pytest.raises(ConfigError, match="Unknown judge kind"):
        make_judge("f1")
    with pytest.raises(ConfigError, match="No judge for dataset"):
        make_judge("llm", backend, dataset="squad")
    with pytest.raises(ConfigError, match="Unknown parameter"):
        make_judge("llm", backend, dataset="locomo", top_k=3)
