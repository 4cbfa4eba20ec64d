"""Deterministic "models" for the stub server: replies computed from the prompt alone, so two
runs that make the same calls get the same replies (the basis of "equal outputs" tests)."""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

from tests.support.openai_stub import Reply

TURN_RE = re.compile(r"<<<TURN\n(.*?)\nTURN>>>", re.S)
QUESTION_RE = re.compile(r"<<<QUESTION\n(.*?)\nQUESTION>>>", re.S)


def prompt_text(body: dict[str, Any]) -> str:
    """The request's own prompt: its first user message (a JSON re-ask appends others)."""
    users = [m["content"] for m in body.get("messages", []) if m.get("role") == "user"]
    return users[0] if users else ""


def extraction_reply(body: dict[str, Any]) -> Reply:
    """One fact per turn: "LLM: <turn text>" (the extractor's JSON shape)."""
    match = TURN_RE.search(prompt_text(body))
    turn_text = match.group(1) if match else "(no turn)"
    fact = {"fact": f"LLM: {turn_text[:80]}", "keywords": ["llm"], "topics": ["general"]}
    return Reply(json.dumps({"facts": [fact]}), prompt_tokens=100, completion_tokens=20)


def qa_reply(body: dict[str, Any]) -> Reply:
    """The answerer replies with an answer derived from the question; the judge grades it
    CORRECT when the question's digest is even (a mix of labels, the same on every run)."""
    prompt = prompt_text(body)
    question = QUESTION_RE.search(prompt)
    digest = hashlib.sha256((question.group(1) if question else prompt).encode()).hexdigest()
    if "<<<ANSWER" in prompt:
        label = "CORRECT" if int(digest[:2], 16) % 2 == 0 else "WRONG"
        return Reply(json.dumps({"reasoning": "scripted", "label": label}), 40, 8)
    return Reply(f"answer {digest[:8]}", 120, 4)


def scripted_reply(body: dict[str, Any]) -> Reply:
    """Extraction or question answering, whichever the prompt asks for."""
    if TURN_RE.search(prompt_text(body)):
        return extraction_reply(body)
    return qa_reply(body)
