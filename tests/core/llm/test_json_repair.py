import pytest

from mera_pipelines.core.errors import LLMCallError
from mera_pipelines.core.llm.json_repair import (
    RawReply,
    complete_json_with_one_reask,
    json_value_closed,
    judge_first_reply,
    parse_json_lenient,
    parse_json_with_flag,
    validate_shape,
    with_json_instruction,
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"a": 1}', {"a": 1}),
        ("[1, 2, 3]", [1, 2, 3]),
        ('```json\n{"a": [1, 2]}\n```', {"a": [1, 2]}),
        ('```\n{"a": 1}\n```\nHope this helps!', {"a": 1}),
        ('Sure! Here is the JSON you asked for:\n{"answer": "Paris"}', {"answer": "Paris"}),
        ('{"answer": "Paris"} I hope this helps. {"other": 2}', {"answer": "Paris"}),
        ('{"a": 1, "b": [1, 2,],}', {"a": 1, "b": [1, 2]}),
        ("{'a': 'x', 'b': ['y', 'z']}", {"a": "x", "b": ["y", "z"]}),
        ("{'quote': 'she said \"hi\"'}", {"quote": 'she said "hi"'}),
        ("{'name': 'O\\'Brien'}", {"name": "O'Brien"}),
        ('{"text": "it\'s fine, {really}"}', {"text": "it's fine, {really}"}),
        (
            "{'ok': True, 'missing': None, 'bad': False}",
            {"ok": True, "missing": None, "bad": False},
        ),
        (
            '{"facts": [{"text": "Alice likes tea"}, {"text": "Bob',
            {"facts": [{"text": "Alice likes tea"}, {"text": "Bob"}]},
        ),
        ('{"a": 1, "b": {"c": [1, 2', {"a": 1, "b": {"c": [1, 2]}}),
        ('{"a": 1, "b":', {"a": 1}),
        ('{"a": 1, "b": tru', {"a": 1}),
        ('```json\n{"a": [1, 2', {"a": [1, 2]}),
        ('<think>maybe {"a": 0}?</think>{"a": 1}', {"a": 1}),
        ('Answer with {placeholder} first: {"a": 1}', {"a": 1}),
        ('{"multi": "line\nstring"}', {"multi": "line\nstring"}),
        ("42", 42),
        # SmolLM2's habit: an answer, then a restatement cut off by the token limit.
        (
            '{"facts": ["a", "b"]}\n\nHere is the JSON:\n\n```json\n{\n  "facts": ["a", "b',
            {"facts": ["a", "b"]},
        ),
        ('```json\n{"a": 1, "b": [2\n```\nThat is all.', {"a": 1, "b": [2]}),
        ('See [1] below.\n```json\n{"a": 1}\n```', {"a": 1}),
    ],
)
def test_parse_json_lenient_repairs_common_model_mistakes(text, expected):
    assert parse_json_lenient(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "",
        "   ",
        None,
        "I cannot help with that.",
        "The answer is Paris.",
        "{not json at all: ]",
        "<think>only thoughts {",
        # a bare word starting with a non-ASCII letter (a GRPO sample crashed the parser once)
        '{"intents": [{"desired_fact": "x", "entities": [ícone]}]}',
        "{'a': é}",
    ],
)
def test_parse_json_lenient_raises_value_error_when_hopeless(text):
    with pytest.raises(ValueError):
        parse_json_lenient(text)


def test_repaired_flag_is_false_for_clean_or_merely_fenced_json():
    assert parse_json_with_flag('{"a": 1}').repaired is False
    assert parse_json_with_flag('```json\n{"a": 1}\n```').repaired is False
    assert parse_json_with_flag('{"a": 1,}').repaired is True
    assert parse_json_with_flag('Here: {"a": 1}').repaired is True


SCHEMA = {
    "type": "object",
    "required": ["facts", "done"],
    "properties": {
        "facts": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["text"],
                "properties": {"text": {"type": "string"}, "turn": {"type": "integer"}},
            },
        },
        "done": {"type": "boolean"},
        "score": {"type": ["number", "null"]},
        "mode": {"enum": ["a", "b"]},
    },
}


def test_validate_shape_accepts_a_matching_value():
    value = {"facts": [{"text": "x", "turn": 3}], "done": False, "score": None, "mode": "a"}
    assert validate_shape(value, SCHEMA) == []
    assert validate_shape({"anything": 1}, None) == []


def test_validate_shape_names_each_problem_with_its_path():
    value = {"facts": [{"turn": 1.5}, "oops"], "score": True, "mode": "c"}
    problems = validate_shape(value, SCHEMA)
    assert "$: missing required key 'done'" in problems
    assert "$.facts[0]: missing required key 'text'" in problems
    assert "$.facts[0].turn: expected integer, got number" in problems
    assert "$.facts[1]: expected object, got string" in problems
    assert "$.score: expected number or null, got boolean" in problems
    assert "$.mode: 'c' is not one of ['a', 'b']" in problems
    assert validate_shape([1], {"type": "object"}) == ["$: expected object, got array"]


def test_with_json_instruction_only_when_json_is_not_mentioned():
    asking = [{"role": "user", "content": "Reply in JSON."}]
    assert with_json_instruction(asking) is asking
    added = with_json_instruction(
        [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}]
    )
    assert added[0]["content"].startswith("Be brief.\n") and "JSON" in added[0]["content"]
    assert len(added) == 2
    prepended = with_json_instruction([{"role": "user", "content": "Hi"}])
    assert prepended[0]["role"] == "system" and len(prepended) == 2


class ScriptedCall:
    """A stand-in for one backend request (unit test of the re-ask protocol only)."""

    def __init__(self, *texts):
        self.texts = list(texts)
        self.requests = []

    def __call__(self, messages):
        self.requests.append(messages)
        return RawReply(self.texts.pop(0), tokens_in=10, tokens_out=4)


def test_one_reask_shows_the_bad_output_and_sums_tokens():
    call = ScriptedCall("no json here", '{"a": 1}')
    reply = complete_json_with_one_reask(
        call, [{"role": "user", "content": "JSON please"}], None, "m"
    )
    assert reply.value == {"a": 1} and reply.repaired is True
    assert (reply.tokens_in, reply.tokens_out) == (20, 8)
    reask = call.requests[1]
    assert reask[-2] == {"role": "assistant", "content": "no json here"}
    assert "could not be used" in reask[-1]["content"]


def test_shape_problem_triggers_the_reask_and_a_second_failure_raises():
    call = ScriptedCall('{"b": 1}', '{"c": 2}')
    with pytest.raises(LLMCallError, match="Model 'tiny-model'.*missing required key 'a'"):
        complete_json_with_one_reask(
            call,
            [{"role": "user", "content": "x"}],
            {"type": "object", "required": ["a"]},
            "tiny-model",
        )
    assert len(call.requests) == 2


@pytest.mark.parametrize(
    ("text", "accepted", "cut_off"),
    [
        ('{"a": 1}', {"a": 1}, None),
        ('Sure: {"a": 1}', {"a": 1}, None),  # repaired, but whole: taken as it is
        ('{"a": [1, 2', None, {"a": [1, 2]}),  # cut off: closed, kept only as a last resort
        ('{"b": 1}', None, None),  # the wrong shape
        ("no json", None, None),
    ],
)
def test_a_first_reply_is_accepted_only_whole_and_in_shape(text, accepted, cut_off):
    verdict = judge_first_reply(text, {"type": "object", "required": ["a"]})
    assert (verdict.accepted.value if verdict.accepted else None) == accepted
    assert (verdict.cut_off.value if verdict.cut_off else None) == cut_off
    assert bool(verdict.problem) == (accepted is None)


@pytest.mark.parametrize(
    ("text", "closed"),
    [
        ('{"intents": []}', True),
        (" \n[1, 2]", True),
        ('```json\n{"a": 1}', True),  # the fence need not be closed: the value is
        ('{"a": 1} and then more', True),
        ('{"a": "a } inside a string"', False),
        ('{"a": [1, 2]', False),
        ('{"intents": [{"desired_fact": "x"}', False),
        ('Sure: {"a": 1}', False),  # prose first: left to the lenient parser, never cut short
        ('<think>hm</think>{"a": 1}', False),
        ("{'a': 1}", False),  # only the lenient parser reads this: let the model finish
        ("", False),
    ],
)
def test_json_value_closed_only_when_the_reply_opens_with_a_value_that_closed(text, closed):
    assert json_value_closed(text) is closed


@pytest.mark.parametrize("text", ['{"a": 1}', '```json\n{"a": [1, {"b": 2}]}', '[{"x": "y"}]'])
def test_a_reply_cut_where_its_value_closes_parses_to_the_same_value_unrepaired(text):
    longer = text + ' {"restated": true} and some prose'
    assert json_value_closed(text)
    assert parse_json_with_flag(text).value == parse_json_with_flag(longer).value
    assert not parse_json_with_flag(text).repaired
