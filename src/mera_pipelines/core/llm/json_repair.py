"""Lenient JSON decoding of chat-model replies, a light shape check, and the one re-ask.

Small models wrap JSON in prose and code fences, use Python quoting, leave trailing commas and
stop mid-object when they hit the token limit. We repair what can be repaired without guessing
content, and say why when we cannot.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from mera_pipelines.core.errors import LLMCallError
from mera_pipelines.core.llm.base import ChatMessage

_FENCE_OPEN = re.compile(r"```[ \t]*(?:json|JSON|javascript|js)?[ \t]*\r?\n?")
_THINK_BLOCK = re.compile(r"<think>.*?(?:</think>|\Z)", re.DOTALL)
_OPENERS = {"{": "}", "[": "]"}
_VALUE_DECODER = json.JSONDecoder(strict=False)  # reads what parse_json_with_flag's loads reads
_CLOSERS = {"}": "{", "]": "["}
_PYTHON_LITERALS = {"True": "true", "False": "false", "None": "null"}
_BARE_WORD = re.compile(r"[^\W\d]\w*")  # a letter or underscore, then word characters
_MAX_START_ATTEMPTS = 20
_JSON_INSTRUCTION = "Reply with a single JSON value only."


@dataclass(frozen=True)
class LenientParse:
    value: Any
    repaired: bool  # the text was not valid JSON once fences and reasoning were removed
    cut_off: bool = False  # the reply stopped mid-value, so the value had to be closed


def parse_json_lenient(text: str | None) -> Any:
    """Decode the first JSON object or array in ``text``; raise ValueError when hopeless."""
    return parse_json_with_flag(text).value


def parse_json_with_flag(text: str | None) -> LenientParse:
    """Like :func:`parse_json_lenient`, also saying whether anything beyond fences was repaired."""
    if text is None or not text.strip():
        raise ValueError("empty reply")
    body = _THINK_BLOCK.sub("", text).strip()
    if not body:
        raise ValueError("empty reply")
    try:
        return LenientParse(json.loads(body, strict=False), repaired=False)
    except json.JSONDecodeError:
        pass
    fenced = _fenced_part(body)
    if fenced is not None:
        try:
            return LenientParse(json.loads(fenced, strict=False), repaired=False)
        except json.JSONDecodeError:
            pass
    # A fenced block first (the model's own idea of where its JSON is), then the whole reply.
    texts = [fenced, body] if fenced is not None else [body]
    starts_by_text = [_value_starts(candidate) for candidate in texts]
    if not any(starts_by_text):
        raise ValueError(f"no JSON object or array found in reply: {_preview(text)}")
    # A value that closes beats one we must close ourselves: models often restate their JSON,
    # and the restatement is the copy that hits the token limit.
    for allow_truncated in (False, True):
        for candidate, starts in zip(texts, starts_by_text, strict=True):
            for start in starts:
                value = _decode_from(candidate, start, allow_truncated)
                if value is _UNCLOSED:
                    break  # every later start lies inside this unclosed value
                if value is not _NOTHING:
                    return LenientParse(value, repaired=True, cut_off=allow_truncated)
    raise ValueError(f"reply is not repairable JSON: {_preview(text)}")


def json_value_closed(text: str) -> bool:
    """True once a reply that opens with a JSON value (fenced or not) has closed that value.

    Generation may stop there: the parser takes a reply's first value, so later tokens change
    nothing but the time spent (a GRPO planner that never learnt to stop wrote to its token
    limit after every plan). A reply opening with prose, reasoning or a value only the lenient
    parser would read is never cut short.
    """
    body = text.lstrip()
    fence = _FENCE_OPEN.match(body)
    if fence is not None:
        body = body[fence.end() :].lstrip()
    if not body or body[0] not in _OPENERS:
        return False
    try:
        _VALUE_DECODER.raw_decode(body)
    except json.JSONDecodeError:
        return False
    return True


def _fenced_part(text: str) -> str | None:
    """The inside of the first ``` fence, or None when there is none."""
    match = _FENCE_OPEN.search(text)
    if match is None:
        return None
    inside = text[match.end() :]
    closing = inside.find("```")
    # An unclosed fence means the reply was cut off: keep everything after the opening.
    return (inside if closing < 0 else inside[:closing]).strip()


def _value_starts(text: str) -> list[int]:
    return [index for index, ch in enumerate(text) if ch in _OPENERS][:_MAX_START_ATTEMPTS]


def _preview(text: str, limit: int = 120) -> str:
    flat = " ".join(text.split())
    return repr(flat if len(flat) <= limit else flat[:limit] + "...")


class _Nothing:
    pass


_NOTHING = _Nothing()  # no value decodes from this start
_UNCLOSED = _Nothing()  # the value from this start runs to the end of the text unclosed


@dataclass
class _Walk:
    """The state of one pass over the text from a candidate start."""

    out: list[str]
    stack: list[str]
    # (length of out, copy of stack) after each complete member: where a truncated
    # reply can be cut back to and still close cleanly.
    cut_points: list[tuple[int, list[str]]]
    in_string: str | None = None  # the quote character of the string we are inside


def _decode_from(body: str, start: int, allow_truncated: bool) -> Any:
    walk = _Walk(out=[], stack=[], cut_points=[])
    index = start
    finished = False
    while index < len(body):
        ch = body[index]
        if walk.in_string is not None:
            index = _string_char(walk, body, index)
            continue
        if ch in "\"'":
            walk.in_string = ch
            walk.out.append('"')
        elif ch in _OPENERS:
            walk.stack.append(ch)
            walk.out.append(ch)
            walk.cut_points.append((len(walk.out), list(walk.stack)))
        elif ch in _CLOSERS:
            if not walk.stack or walk.stack[-1] != _CLOSERS[ch]:
                return _NOTHING
            _drop_trailing_comma(walk.out)
            walk.stack.pop()
            walk.out.append(ch)
            if not walk.stack:
                finished = True
                break
        elif ch == ",":
            walk.cut_points.append((len(walk.out), list(walk.stack)))
            walk.out.append(ch)
        elif ch.isalpha() or ch == "_":
            # any letter starts a bare word, not only ASCII: small models write Portuguese or
            # Cyrillic words outside quotes too, and the word must be consumed, not crash
            word = _BARE_WORD.match(body, index).group(0)
            walk.out.append(_PYTHON_LITERALS.get(word, word))
            index += len(word)
            continue
        else:
            walk.out.append(ch)
        index += 1
    if finished:
        return _loads_or_nothing("".join(walk.out))
    return _close_truncated(walk) if allow_truncated else _UNCLOSED


def _string_char(walk: _Walk, body: str, index: int) -> int:
    """Copy one (possibly escaped) string character into the output; return the next index."""
    ch = body[index]
    quote = walk.in_string
    if ch == "\\" and index + 1 < len(body):
        escaped = body[index + 1]
        # \' is not a JSON escape; inside a single-quoted string it just means a quote.
        walk.out.append("'" if escaped == "'" else ch + escaped)
        return index + 2
    if ch == quote:
        walk.in_string = None
        walk.out.append('"')
    elif ch == '"':  # a double quote inside a single-quoted string
        walk.out.append('\\"')
    else:
        walk.out.append(ch)
    return index + 1


def _drop_trailing_comma(out: list[str]) -> None:
    position = len(out) - 1
    while position >= 0 and out[position].isspace():
        position -= 1
    if position >= 0 and out[position] == ",":
        del out[position:]


def _close_truncated(walk: _Walk) -> Any:
    """The reply stopped before its value closed: close it, or cut back to the last whole member."""
    head = list(walk.out)
    if walk.in_string is not None:
        head.append('"')
    _drop_trailing_comma(head)
    attempt = _loads_or_nothing("".join(head) + _closers_for(walk.stack))
    if attempt is not _NOTHING:
        return attempt
    for length, stack in reversed(walk.cut_points):
        prefix = walk.out[:length]
        _drop_trailing_comma(prefix)
        attempt = _loads_or_nothing("".join(prefix) + _closers_for(stack))
        if attempt is not _NOTHING:
            return attempt
    return _NOTHING


def _closers_for(stack: list[str]) -> str:
    return "".join(_OPENERS[opener] for opener in reversed(stack))


def _loads_or_nothing(candidate: str) -> Any:
    try:
        return json.loads(candidate, strict=False)
    except json.JSONDecodeError:
        return _NOTHING


# ---------------------------------------------------------------------------------------------
# Shape check: a small subset of JSON schema, enough to tell a model what it got wrong.

_TYPE_CHECKS: dict[str, Callable[[Any], bool]] = {
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "string": lambda v: isinstance(v, str),
    "number": lambda v: isinstance(v, int | float) and not isinstance(v, bool),
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
    "null": lambda v: v is None,
}


def validate_shape(value: Any, schema: dict[str, Any] | None, path: str = "$") -> list[str]:
    """Problems of ``value`` against a JSON-schema subset (type, required, properties, items, enum).

    Returns an empty list when the value fits. Unknown schema keywords are ignored.
    """
    if not schema:
        return []
    expected = schema.get("type")
    if expected is not None:
        allowed = [expected] if isinstance(expected, str) else list(expected)
        if not any(_TYPE_CHECKS.get(name, lambda _v: True)(value) for name in allowed):
            return [f"{path}: expected {' or '.join(allowed)}, got {_json_type(value)}"]
    problems: list[str] = []
    if "enum" in schema and value not in schema["enum"]:
        problems.append(f"{path}: {value!r} is not one of {schema['enum']!r}")
    if isinstance(value, dict):
        problems.extend(
            f"{path}: missing required key '{key}'"
            for key in schema.get("required", [])
            if key not in value
        )
        for key, sub_schema in schema.get("properties", {}).items():
            if key in value:
                problems.extend(validate_shape(value[key], sub_schema, f"{path}.{key}"))
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        for position, item in enumerate(value):
            problems.extend(validate_shape(item, schema["items"], f"{path}[{position}]"))
    return problems


def _json_type(value: Any) -> str:
    for name in ("null", "boolean", "integer", "number", "string", "array", "object"):
        if _TYPE_CHECKS[name](value):
            return name
    return type(value).__name__


# ---------------------------------------------------------------------------------------------
# The JSON call protocol shared by every backend: parse leniently, re-ask once, then give up.


@dataclass(frozen=True)
class RawReply:
    """One answer of a model to one request, before any JSON handling."""

    text: str
    tokens_in: int
    tokens_out: int


@dataclass(frozen=True)
class JsonReply:
    value: Any
    text: str  # the reply that decoded (the re-asked one when a re-ask was needed)
    tokens_in: int  # summed over the first call and the re-ask
    tokens_out: int
    repaired: bool


def decode_json_reply(text: str, schema: dict[str, Any] | None) -> tuple[LenientParse | None, str]:
    """(decoded value, "") when ``text`` holds acceptable JSON; (None, the problem) otherwise."""
    try:
        parsed = parse_json_with_flag(text)
    except ValueError as exc:
        return None, str(exc)
    problems = validate_shape(parsed.value, schema)
    if problems:
        return None, "JSON does not match the expected shape: " + "; ".join(problems[:5])
    return parsed, ""


CUT_OFF_PROBLEM = "the reply stopped before its JSON value was complete"


@dataclass(frozen=True)
class FirstReply:
    """How the JSON protocol judges a model's first answer: taken as it is, or asked again."""

    accepted: LenientParse | None  # usable as it is
    # A reply cut off mid-value (a token limit, or a connection cut by a proxy) is closed only
    # as a last resort: closing it keeps a cut string as if it were the model's answer, so the
    # model is asked once more first. The GRPO reward scores it as unparseable for that reason.
    cut_off: LenientParse | None
    problem: str  # why it was not accepted ("" when it was)


def judge_first_reply(text: str, schema: dict[str, Any] | None) -> FirstReply:
    """The one rule for a first reply: it must decode, fit ``schema`` and not be cut off."""
    parsed, problem = decode_json_reply(text, schema)
    if parsed is None:
        return FirstReply(None, None, problem)
    if parsed.cut_off:
        return FirstReply(None, parsed, CUT_OFF_PROBLEM)
    return FirstReply(parsed, None, "")


def with_json_instruction(messages: list[ChatMessage]) -> list[ChatMessage]:
    """The messages, with a request for JSON in the system turn unless they already mention JSON.

    OpenAI's JSON mode rejects a conversation that never says 'JSON', and small local models
    follow the request best when the system turn makes it.
    """
    if any("json" in message.get("content", "").lower() for message in messages):
        return messages
    if messages and messages[0].get("role") == "system":
        first = messages[0]
        return [{**first, "content": f"{first['content']}\n{_JSON_INSTRUCTION}"}, *messages[1:]]
    return [{"role": "system", "content": _JSON_INSTRUCTION}, *messages]


def reask_messages(messages: list[ChatMessage], bad_text: str, problem: str) -> list[ChatMessage]:
    """The conversation extended with the bad reply and a request to answer again as JSON."""
    return [
        *messages,
        {"role": "assistant", "content": bad_text},
        {
            "role": "user",
            "content": (
                f"Your previous reply could not be used: {problem}. "
                "Reply again with only the JSON value: no prose, no code fences, "
                "double-quoted keys and strings."
            ),
        },
    ]


def complete_json_with_one_reask(
    call: Callable[[list[ChatMessage]], RawReply],
    messages: list[ChatMessage],
    schema: dict[str, Any] | None,
    model_name: str,
) -> JsonReply:
    """Ask, decode leniently, re-ask once with the bad output shown; raise LLMCallError after."""
    first = call(messages)
    verdict = judge_first_reply(first.text, schema)
    if verdict.accepted is not None:
        accepted = verdict.accepted
        return JsonReply(
            accepted.value, first.text, first.tokens_in, first.tokens_out, accepted.repaired
        )
    second = call(reask_messages(messages, first.text, verdict.problem))
    parsed, second_problem = decode_json_reply(second.text, schema)
    if parsed is None and verdict.cut_off is not None:
        return JsonReply(
            verdict.cut_off.value,
            first.text,
            first.tokens_in + second.tokens_in,
            first.tokens_out + second.tokens_out,
            repaired=True,
        )
    if parsed is None:
        raise LLMCallError(
            f"Model '{model_name}' did not return usable JSON after one repair request: "
            f"{second_problem} (first reply: {verdict.problem})",
            tokens_in=first.tokens_in + second.tokens_in,
            tokens_out=first.tokens_out + second.tokens_out,
        )
    return JsonReply(
        parsed.value,
        second.text,
        first.tokens_in + second.tokens_in,
        first.tokens_out + second.tokens_out,
        repaired=True,
    )
