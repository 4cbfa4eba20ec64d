"""LLM judges: is a predicted answer correct? Only for reports; never part of the method.

- ``LoCoMoLLMJudge``: a lenient CORRECT/WRONG judge in the style used by mem0 and LightMem
  (generous on paraphrase and date formats), JSON reply. Category 5 (adversarial) is excluded,
  as they do: those questions are scored by token F1 only.
- ``LongMemEvalLLMJudge``: yes/no judges per question type following the logic of
  LongMemEval's official ``evaluate_qa.py``: temporal-reasoning tolerates off-by-one counts;
  knowledge-update accepts the updated answer beside older information; single-session-
  preference is judged against the gold answer as a rubric; ``_abs`` questions are correct
  when the response says the information is missing. Also used for our JSONL format.

A judge that fails (the call errors, the reply has no usable label) returns
``correct=None`` with the error: a failure is never counted as a wrong answer.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Protocol

from mera_pipelines.core.errors import ConfigError, MeraError
from mera_pipelines.core.llm.base import ChatMessage, Completion, LLMBackend
from mera_pipelines.core.records import Question
from mera_pipelines.core.roles.common import (
    build_role,
    call_options,
    fence_data,
    load_prompt,
    render_messages,
    spent_tokens,
)


@dataclass
class JudgeResult:
    correct: bool | None  # None: excluded from judging, or the judge failed (see error)
    label: str  # "CORRECT" / "WRONG", "yes" / "no", "excluded" or "error"
    tokens_in: int = 0
    tokens_out: int = 0
    error: str | None = None


class Judge(Protocol):
    name: str  # e.g. "llm:gpt-4o-mini"; reports print it next to the accuracy

    def judge(self, question: Question, prediction: str) -> JudgeResult: ...


_THINK_RE = re.compile(r"<think>.*?(?:</think>|$)", re.DOTALL | re.IGNORECASE)


def judge_messages(template: str, question: Question, prediction: str) -> list[ChatMessage]:
    values = {
        "question": fence_data(question.question),
        "gold": fence_data(str(question.answer)),
        "prediction": fence_data(prediction or "(no answer)"),
    }
    return render_messages(template, values)


class _LLMJudgeBase:
    def __init__(self, backend: LLMBackend, *, max_tokens: int, temperature: float) -> None:
        if max_tokens < 1:
            raise ConfigError(f"judge max_tokens must be >= 1, got {max_tokens}")
        self.backend = backend
        self.max_tokens = max_tokens
        self.temperature = temperature
        self.name = f"llm:{backend.model_name}"

    def _options(self, method: Any, question: Question) -> dict[str, Any]:
        return call_options(
            method, question.memory_id, max_tokens=self.max_tokens, temperature=self.temperature
        )


def _judge_result(
    verdict: bool | None, labels: tuple[str, str], completion: Completion, expected: str
) -> JudgeResult:
    """A parsed verdict with the call's cost; ``labels`` name True and False. No verdict (the
    reply held no ``expected`` label) is an error, never a wrong answer."""
    if verdict is None:
        return JudgeResult(
            None,
            "error",
            completion.tokens_in,
            completion.tokens_out,
            error=f"no {expected} in the judge's reply: {completion.text[:200]!r}",
        )
    label = labels[0] if verdict else labels[1]
    return JudgeResult(verdict, label, completion.tokens_in, completion.tokens_out)


# ---- LoCoMo -------------------------------------------------------------------------------

LABEL_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"reasoning": {"type": "string"}, "label": {"type": "string"}},
    "required": ["label"],
}
LOCOMO_PROMPT_NAME = "judge_locomo.txt"


def parse_correct_wrong(value: Any) -> bool | None:
    """{"label": "CORRECT"} -> True, "WRONG" -> False; anything else -> None."""
    label = value.get("label") if isinstance(value, dict) else None
    if not isinstance(label, str):
        return None
    key = label.strip().strip(".").upper()
    return {"CORRECT": True, "WRONG": False}.get(key)


class LoCoMoLLMJudge(_LLMJudgeBase):
    """Lenient CORRECT/WRONG judge for LoCoMo; category 5 / abstention questions excluded."""

    def __init__(
        self,
        backend: LLMBackend,
        prompt_template: str | None = None,
        *,
        max_tokens: int = 256,
        temperature: float = 0.0,
    ) -> None:
        super().__init__(backend, max_tokens=max_tokens, temperature=temperature)
        self.prompt_template = prompt_template or load_prompt(LOCOMO_PROMPT_NAME)

    def judge(self, question: Question, prediction: str) -> JudgeResult:
        if question.is_abstention or str(question.category).strip() == "5":
            return JudgeResult(None, "excluded")
        messages = judge_messages(self.prompt_template, question, prediction)
        options = self._options(self.backend.complete_json, question)
        try:
            completion = self.backend.complete_json(messages, schema=LABEL_SCHEMA, **options)
        except (MeraError, ValueError) as exc:
            return JudgeResult(
                None, "error", *spent_tokens(exc), error=f"{type(exc).__name__}: {exc}"
            )
        verdict = parse_correct_wrong(completion.parsed)
        return _judge_result(verdict, ("CORRECT", "WRONG"), completion, "CORRECT/WRONG label")


# ---- LongMemEval ---------------------------------------------------------------------------

LONGMEMEVAL_PROMPT_NAMES = {
    "default": "judge_longmemeval_default.txt",
    "temporal-reasoning": "judge_longmemeval_temporal.txt",
    "knowledge-update": "judge_longmemeval_knowledge_update.txt",
    "single-session-preference": "judge_longmemeval_preference.txt",
    "abstention": "judge_longmemeval_abstention.txt",
}
_YES_NO_RE = re.compile(r"\b(yes|no)\b", re.IGNORECASE)


def parse_yes_no(text: str) -> bool | None:
    """The first standalone "yes" or "no" of a reply (reasoning blocks skipped); else None."""
    match = _YES_NO_RE.search(_THINK_RE.sub("", text or ""))
    if match is None:
        return None
    return match[1].lower() == "yes"


def longmemeval_prompt_key(question: Question) -> str:
    """Which judge prompt a question gets: abstention first, then its type, else default."""
    if question.is_abstention:
        return "abstention"
    category = str(question.category).strip()
    return category if category in LONGMEMEVAL_PROMPT_NAMES else "default"


class LongMemEvalLLMJudge(_LLMJudgeBase):
    """Per-type yes/no judges (single-session-user/assistant and multi-session share one)."""

    def __init__(
        self,
        backend: LLMBackend,
        prompt_templates: dict[str, str] | None = None,
        *,
        max_tokens: int = 16,
        temperature: float = 0.0,
    ) -> None:
        super().__init__(backend, max_tokens=max_tokens, temperature=temperature)
        templates = {key: load_prompt(name) for key, name in LONGMEMEVAL_PROMPT_NAMES.items()}
        unknown = set(prompt_templates or {}) - set(templates)
        if unknown:
            raise ConfigError(
                f"Unknown LongMemEval judge prompt(s) {sorted(unknown)}; known: {sorted(templates)}"
            )
        templates.update(prompt_templates or {})
        self.prompt_templates = templates

    def judge(self, question: Question, prediction: str) -> JudgeResult:
        template = self.prompt_templates[longmemeval_prompt_key(question)]
        messages = judge_messages(template, question, prediction)
        options = self._options(self.backend.complete, question)
        try:
            completion = self.backend.complete(messages, **options)
        except (MeraError, ValueError) as exc:
            return JudgeResult(
                None, "error", *spent_tokens(exc), error=f"{type(exc).__name__}: {exc}"
            )
        verdict = parse_yes_no(completion.text)
        return _judge_result(verdict, ("yes", "no"), completion, "yes/no")


# ---- the factory ---------------------------------------------------------------------------

JUDGE_KINDS = ("none", "llm")
_JUDGES_BY_DATASET = {
    "locomo": LoCoMoLLMJudge,
    "longmemeval": LongMemEvalLLMJudge,
    # Our JSONL format has free categories and abstention flags: the per-type judge's
    # default and abstention prompts fit it.
    "jsonl": LongMemEvalLLMJudge,
}


def make_judge(
    kind: str, backend: LLMBackend | None = None, dataset: str = "locomo", **params: Any
) -> Judge | None:
    """``kind="none"`` -> None (reports then give token F1 only and ``accuracy: null``);
    ``kind="llm"`` -> the dataset's LLM judge over ``backend``."""
    judge_class = _JUDGES_BY_DATASET.get(str(dataset).strip().lower())
    if kind == "llm" and backend is not None and judge_class is None:
        raise ConfigError(
            f"No judge for dataset {dataset!r}; expected one of {', '.join(_JUDGES_BY_DATASET)}."
        )
    return build_role("judge", kind, {"none": None, "llm": judge_class}, backend, params)


__all__ = [
    "JUDGE_KINDS",
    "LABEL_SCHEMA",
    "Judge",
    "JudgeResult",
    "LoCoMoLLMJudge",
    "LongMemEvalLLMJudge",
    "judge_messages",
    "longmemeval_prompt_key",
    "make_judge",
    "parse_correct_wrong",
    "parse_yes_no",
]
