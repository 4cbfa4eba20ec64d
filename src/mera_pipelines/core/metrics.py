"""Scoring: LoCoMo token F1, evidence recall per round, per-system aggregation, failure attribution.

Token F1 follows LoCoMo's official evaluation (snap-research/locomo ``task_eval/evaluation.py``)
exactly: commas dropped, lowercase, ASCII punctuation removed, the words "a", "an", "the" and
"and" removed, whitespace split, every token Porter-stemmed (NLTK's ``PorterStemmer`` in its
default NLTK_EXTENSIONS mode, re-implemented below because nltk is not a dependency), then
bag-of-tokens F1. Category rules as there: 1 (multi-hop) splits gold and prediction on commas
and averages, over gold parts, the best F1 of any prediction part; 3 (open-domain) scores
against the gold cut at its first ';'; 2 and 4 plain F1; 5 (adversarial) scores 1 when the
prediction contains "no information available" or "not mentioned", else 0.

Evidence recall is measured at parent-turn level and is cumulative: after round t, the share of
gold turns among all turns retrieved (shown to the verifier) in rounds 1..t; the same for
accepted turns. Abstention questions (LoCoMo category 5, LongMemEval ``_abs``) have no
answer-bearing evidence and are left out of every recall average.
"""

from __future__ import annotations

import re
import string
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from functools import lru_cache
from statistics import fmean
from typing import Any

from mera_pipelines.core.errors import ConfigError
from mera_pipelines.core.records import Question, Trajectory

# ---- Porter stemmer (NLTK's NLTK_EXTENSIONS mode) ----------------------------------------------

_VOWELS = frozenset("aeiou")
# Irregular forms NLTK maps directly, before the algorithm runs.
_IRREGULAR_STEMS = {
    "sky": "sky",
    "skies": "sky",
    "dying": "die",
    "lying": "lie",
    "tying": "tie",
    "news": "news",
    "innings": "inning",
    "inning": "inning",
    "outings": "outing",
    "outing": "outing",
    "cannings": "canning",
    "canning": "canning",
    "howe": "howe",
    "proceed": "proceed",
    "exceed": "exceed",
    "succeed": "succeed",
}


def _consonant_flags(word: str) -> list[bool]:
    """Porter's consonant test per letter: 'y' is a consonant at the start or after a vowel."""
    flags: list[bool] = []
    for i, letter in enumerate(word):
        if letter in _VOWELS:
            flags.append(False)
        elif letter == "y":
            flags.append(True if i == 0 else not flags[i - 1])
        else:
            flags.append(True)
    return flags


def _measure(stem: str) -> int:
    """m in [C](VC)^m[V]: how many vowel-consonant transitions the stem has."""
    pattern = "".join("c" if c else "v" for c in _consonant_flags(stem))
    return pattern.count("vc")


def _contains_vowel(stem: str) -> bool:
    return not all(_consonant_flags(stem))


def _ends_double_consonant(word: str) -> bool:
    return len(word) >= 2 and word[-1] == word[-2] and _consonant_flags(word)[-1]


def _ends_cvc(word: str) -> bool:
    flags = _consonant_flags(word)
    if len(word) >= 3:
        return flags[-3] and not flags[-2] and flags[-1] and word[-1] not in "wxy"
    return len(word) == 2 and not flags[0] and flags[1]  # an NLTK extension


_Rule = tuple[str, str, Any]  # (suffix, replacement, condition on the stem or None)


def _apply_rules(word: str, rules: Sequence[_Rule]) -> str:
    """The first rule whose suffix matches decides: applied if its condition holds, else the
    word is returned unchanged (no later rule is tried)."""
    for suffix, replacement, condition in rules:
        if suffix == "*d":
            if not _ends_double_consonant(word):
                continue
            stem = word[:-2]
        elif word.endswith(suffix):
            stem = word[: len(word) - len(suffix)]
        else:
            continue
        if condition is None or condition(stem):
            return stem + replacement
        return word
    return word


def _positive(stem: str) -> bool:
    return _measure(stem) > 0


def _above_one(stem: str) -> bool:
    return _measure(stem) > 1


def _step1a(word: str) -> str:
    if word.endswith("ies") and len(word) == 4:
        return word[:-3] + "ie"
    return _apply_rules(
        word, [("sses", "ss", None), ("ies", "i", None), ("ss", "ss", None), ("s", "", None)]
    )


def _step1b(word: str) -> str:
    if word.endswith("ied"):
        return word[:-3] + ("ie" if len(word) == 4 else "i")
    if word.endswith("eed"):
        stem = word[:-3]
        return stem + "ee" if _measure(stem) > 0 else word
    for suffix in ("ed", "ing"):
        if word.endswith(suffix) and _contains_vowel(word[: -len(suffix)]):
            stem = word[: -len(suffix)]
            break
    else:
        return word
    return _apply_rules(
        stem,
        [
            ("at", "ate", None),
            ("bl", "ble", None),
            ("iz", "ize", None),
            ("*d", stem[-1], lambda _: stem[-1] not in "lsz"),
            ("", "e", lambda s: _measure(s) == 1 and _ends_cvc(s)),
        ],
    )


def _step1c(word: str) -> str:
    return _apply_rules(word, [("y", "i", lambda s: len(s) > 1 and _consonant_flags(s)[-1])])


_STEP2_RULES: list[_Rule] = [
    ("ational", "ate", _positive),
    ("tional", "tion", _positive),
    ("enci", "ence", _positive),
    ("anci", "ance", _positive),
    ("izer", "ize", _positive),
    ("bli", "ble", _positive),
    ("alli", "al", _positive),
    ("entli", "ent", _positive),
    ("eli", "e", _positive),
    ("ousli", "ous", _positive),
    ("ization", "ize", _positive),
    ("ation", "ate", _positive),
    ("ator", "ate", _positive),
    ("alism", "al", _positive),
    ("iveness", "ive", _positive),
    ("fulness", "ful", _positive),
    ("ousness", "ous", _positive),
    ("aliti", "al", _positive),
    ("iviti", "ive", _positive),
    ("biliti", "ble", _positive),
    ("fulli", "ful", _positive),
]


def _step2(word: str) -> str:
    if word.endswith("alli") and _positive(word[:-4]):
        return _step2(word[:-4] + "al")
    # NLTK keeps the 'l' of "logi" with the stem when testing the measure ("geologi").
    return _apply_rules(word, [*_STEP2_RULES, ("logi", "log", lambda _: _positive(word[:-3]))])


def _step3(word: str) -> str:
    return _apply_rules(
        word,
        [
            ("icate", "ic", _positive),
            ("ative", "", _positive),
            ("alize", "al", _positive),
            ("iciti", "ic", _positive),
            ("ical", "ic", _positive),
            ("ful", "", _positive),
            ("ness", "", _positive),
        ],
    )


def _step4(word: str) -> str:
    suffixes = ["al", "ance", "ence", "er", "ic", "able", "ible", "ant", "ement", "ment", "ent"]
    rules: list[_Rule] = [(s, "", _above_one) for s in suffixes]
    rules.append(("ion", "", lambda s: _measure(s) > 1 and s[-1:] in ("s", "t")))
    rules.extend((s, "", _above_one) for s in ["ou", "ism", "ate", "iti", "ous", "ive", "ize"])
    return _apply_rules(word, rules)


def _step5a(word: str) -> str:
    if word.endswith("e"):
        stem = word[:-1]
        measure = _measure(stem)
        if measure > 1 or (measure == 1 and not _ends_cvc(stem)):
            return stem
    return word


def _step5b(word: str) -> str:
    return _apply_rules(word, [("ll", "l", lambda _: _measure(word[:-1]) > 1)])


@lru_cache(maxsize=65536)
def porter_stem(word: str) -> str:
    """NLTK's ``PorterStemmer().stem(word)`` (NLTK_EXTENSIONS mode), as LoCoMo's scorer uses."""
    stem = word.lower()
    if stem in _IRREGULAR_STEMS:
        return _IRREGULAR_STEMS[stem]
    if len(word) <= 2:
        return stem
    for step in (_step1a, _step1b, _step1c, _step2, _step3, _step4, _step5a, _step5b):
        stem = step(stem)
    return stem


# ---- token F1 (LoCoMo's official evaluation) --------------------------------------------------

_PUNCTUATION = frozenset(string.punctuation)
_ARTICLES_RE = re.compile(r"\b(a|an|the|and)\b")
# LoCoMo's category-5 check, verbatim: nothing else counts as declining to answer there.
LOCOMO_NOT_AVAILABLE = ("no information available", "not mentioned")
# Wider net for LongMemEval / JSONL abstention questions, whose official judge accepts any
# statement that the information is missing.
_ABSTAIN_RE = re.compile(
    r"not mentioned|no information|not (?:enough|sufficient) information|information (?:is )?"
    r"(?:not|isn't) (?:available|provided|enough|mentioned|given)|(?:is|was) not (?:provided|"
    r"available|specified|stated|given)|(?:did|does|do) not (?:mention|say|specify|state)"
    r"|(?:didn't|doesn't|don't) (?:mention|say|specify|state)|never mentioned|no mention"
    r"|cannot be (?:determined|answered|found)|can't be (?:determined|answered|found)"
    r"|(?:i )?(?:do not|don't) know|unknown|not in the conversation|no record",
    re.IGNORECASE,
)


def normalize_answer(s: str) -> str:
    """LoCoMo's normalisation: drop commas, lowercase, drop ASCII punctuation, drop
    a/an/the/and, collapse whitespace."""
    text = str(s).replace(",", "").lower()
    text = "".join(ch for ch in text if ch not in _PUNCTUATION)
    text = _ARTICLES_RE.sub(" ", text)
    return " ".join(text.split())


def answer_tokens(s: str) -> list[str]:
    """Normalised, Porter-stemmed tokens: what LoCoMo's F1 compares."""
    return [porter_stem(token) for token in normalize_answer(s).split()]


def token_f1(prediction: str, gold: str) -> float:
    """Bag-of-stemmed-tokens F1 (LoCoMo ``f1_score``); 0 when nothing overlaps."""
    predicted = answer_tokens(prediction)
    expected = answer_tokens(gold)
    same = sum((Counter(predicted) & Counter(expected)).values())
    if same == 0:
        return 0.0
    precision = same / len(predicted)
    recall = same / len(expected)
    return 2 * precision * recall / (precision + recall)


def multi_answer_f1(prediction: str, gold: str) -> float:
    """LoCoMo ``f1`` for multi-hop answers: split both on commas; for each gold part the best
    F1 of any prediction part; the mean over gold parts."""
    predictions = [p.strip() for p in str(prediction).split(",")]
    golds = [g.strip() for g in str(gold).split(",")]
    return fmean(max(token_f1(p, g) for p in predictions) for g in golds)


def says_not_mentioned(prediction: str) -> bool:
    """LoCoMo's category-5 test: the prediction says the information is not there."""
    lowered = str(prediction).lower()
    return any(marker in lowered for marker in LOCOMO_NOT_AVAILABLE)


def abstains(prediction: str) -> bool:
    """Whether a prediction declines to answer ("not mentioned", "no information", "the
    conversation does not say", "unknown", ...). Wider than LoCoMo's category-5 test."""
    return bool(_ABSTAIN_RE.search(str(prediction)))


def locomo_f1(prediction: str, gold: str, category: str | int) -> float:
    """Official LoCoMo score of one prediction by category (see the module docstring).

    An unknown category falls back to plain token F1.
    """
    key = str(category).strip()
    if key == "5":
        return 1.0 if says_not_mentioned(prediction) else 0.0
    if key == "1":
        return multi_answer_f1(prediction, gold)
    if key == "3":
        return token_f1(prediction, str(gold).split(";")[0].strip())
    return token_f1(prediction, gold)


DATASETS = ("locomo", "longmemeval", "jsonl")


def answer_f1(
    prediction: str, gold: str, category: str | int, dataset: str, is_abstention: bool = False
) -> float:
    """The F1 reported for one answer: LoCoMo's official rules for ``dataset="locomo"``;
    otherwise plain token F1, and for abstention questions 1 when the prediction abstains."""
    name = str(dataset).strip().lower()
    if name == "locomo":
        return locomo_f1(prediction, gold, category)
    if name not in DATASETS:
        raise ConfigError(f"Unknown dataset {dataset!r} for scoring; expected one of {DATASETS}.")
    if is_abstention:
        return 1.0 if abstains(prediction) else 0.0
    return token_f1(prediction, gold)


# ---- evidence recall -----------------------------------------------------------------------


def cumulative_recall(turn_id_lists: Iterable[Iterable[str]], gold: set[str]) -> list[float]:
    """Share of ``gold`` among the turns seen so far, after each list (an empty gold -> [])."""
    if not gold:
        return []
    seen: set[str] = set()
    out = []
    for turn_ids in turn_id_lists:
        seen.update(turn_ids)
        out.append(len(seen & gold) / len(gold))
    return out


def recall_by_round(trajectory: Trajectory, gold: set[str]) -> list[float]:
    """Cumulative gold recall of the retrieved (viewed) turns after each round.

    A trajectory without rounds (a system that shows evidence without searching) counts as
    one round that viewed ``trajectory.viewed_turn_ids``.
    """
    if not trajectory.rounds:
        return cumulative_recall([trajectory.viewed_turn_ids], set(gold))
    return cumulative_recall([r.retrieved_turn_ids for r in trajectory.rounds], set(gold))


def accepted_recall_by_round(trajectory: Trajectory, gold: set[str]) -> list[float]:
    """Cumulative gold recall of the accepted turns after each round (as ``recall_by_round``)."""
    if not trajectory.rounds:
        return cumulative_recall([trajectory.accepted_turn_ids], set(gold))
    return cumulative_recall([r.accepted_turn_ids for r in trajectory.rounds], set(gold))


def viewed_turns(trajectory: Trajectory) -> set[str]:
    """Distinct parent turns shown to the verifier (or the answerer) over the whole run."""
    seen = set(trajectory.viewed_turn_ids)
    for log in trajectory.rounds:
        seen.update(log.retrieved_turn_ids)
    return seen


def accepted_turns(trajectory: Trajectory) -> set[str]:
    accepted = set(trajectory.accepted_turn_ids)
    for log in trajectory.rounds:
        accepted.update(log.accepted_turn_ids)
    return accepted


def role_tokens(trajectory: Trajectory) -> dict[str, dict[str, int]]:
    """Online tokens per role: a role's trajectory-level usage is its total when present;
    otherwise its per-round usages are summed (never both, so nothing is counted twice)."""
    out: dict[str, dict[str, int]] = {}
    for log in trajectory.rounds:
        for role, usage in log.usage.items():
            if role in trajectory.usage:
                continue
            tokens = out.setdefault(role, {"in": 0, "out": 0})
            tokens["in"] += usage.tokens_in
            tokens["out"] += usage.tokens_out
    for role, usage in trajectory.usage.items():
        out[role] = {"in": usage.tokens_in, "out": usage.tokens_out}
    return dict(sorted(out.items()))


# ---- one row per question ------------------------------------------------------------------


@dataclass
class QuestionResult:
    """Everything the report needs about one question answered by one system."""

    question_id: str
    memory_id: str
    system: str
    category: str
    is_abstention: bool
    gold_turn_ids: list[str]
    answer: str
    gold_answer: str
    f1: float
    judged_correct: bool | None  # None: no judge, judge excluded the question, or judge failed
    recall_by_round: list[float]
    accepted_recall_by_round: list[float]
    rounds: int
    turns_viewed: int
    termination: str
    tokens_in: int
    tokens_out: int
    tokens_by_role: dict[str, dict[str, int]]
    seconds: float
    failure: str | None = None
    judge_label: str | None = None
    judge_error: str | None = None

    @property
    def has_recall(self) -> bool:
        """Counted in recall averages: gold evidence known and the question is answerable."""
        return bool(self.gold_turn_ids) and not self.is_abstention and bool(self.recall_by_round)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def question_result(
    question: Question,
    trajectory: Trajectory,
    f1: float,
    judged_correct: bool | None,
    *,
    judge_label: str | None = None,
    judge_error: str | None = None,
    max_rounds: int | None = None,
) -> QuestionResult:
    """The row of one question, with its failure attributed (see ``attribute_failure``)."""
    gold = set(question.gold_turn_ids)
    tokens = role_tokens(trajectory)
    result = QuestionResult(
        question_id=question.question_id,
        memory_id=question.memory_id,
        system=trajectory.system,
        category=str(question.category),
        is_abstention=question.is_abstention,
        gold_turn_ids=list(question.gold_turn_ids),
        answer=trajectory.answer,
        gold_answer=str(question.answer),
        f1=float(f1),
        judged_correct=judged_correct,
        recall_by_round=recall_by_round(trajectory, gold),
        accepted_recall_by_round=accepted_recall_by_round(trajectory, gold),
        rounds=len(trajectory.rounds),
        turns_viewed=len(viewed_turns(trajectory)),
        termination=trajectory.termination,
        tokens_in=sum(t["in"] for t in tokens.values()),
        tokens_out=sum(t["out"] for t in tokens.values()),
        tokens_by_role=tokens,
        seconds=float(trajectory.seconds),
        judge_label=judge_label,
        judge_error=judge_error,
    )
    result.failure = attribute_failure(result, trajectory, max_rounds=max_rounds)
    return result


# ---- failure attribution -------------------------------------------------------------------

WRONG_F1_BELOW = 0.5
FAILURE_KINDS = (
    "retrieval_failure",
    "premature_stop",
    "verifier_rejection",
    "reasoning_error",
    "incomplete_answer",
    "unattributed",
)
_STOPPED_BY_CHOICE = ("sufficient", "exhausted")


def is_wrong(result: QuestionResult) -> bool:
    """Wrong = the judge said so; without a verdict (no judge, excluded, failed) F1 < 0.5."""
    if result.judged_correct is not None:
        return not result.judged_correct
    return result.f1 < WRONG_F1_BELOW


def attribute_failure(
    result: QuestionResult, trajectory: Trajectory, max_rounds: int | None = None
) -> str | None:
    """Why a wrong answer went wrong, from the trajectory alone (None for a right answer).

    Checked in this order:

    - abstention question answered anyway -> ``reasoning_error`` (there is no evidence to
      miss: the answerer should have said the information is not there);
    - no gold evidence known -> ``unattributed``;
    - a gold turn was never viewed, and the loop stopped by its own decision (``sufficient``
      or ``exhausted``) with rounds left (fewer than ``max_rounds``; unknown ``max_rounds``
      counts as rounds left) -> ``premature_stop``;
    - a gold turn was never viewed otherwise (T_max reached, single-shot retrieval)
      -> ``retrieval_failure``;
    - every gold turn viewed but one rejected by the verifier -> ``verifier_rejection``;
    - every gold turn viewed and accepted, and the answer is partly right -> ``incomplete_answer``:
      a multi-part gold answer (comma/semicolon separated) with some parts present in the
      prediction and some missing, or a single answer with 0 < F1 < 0.5;
    - every gold turn viewed and accepted otherwise -> ``reasoning_error``.
    """
    if not is_wrong(result):
        return None
    if result.is_abstention:
        return "reasoning_error"
    gold = set(result.gold_turn_ids)
    if not gold:
        return "unattributed"
    if not gold <= viewed_turns(trajectory):
        rounds_left = max_rounds is None or len(trajectory.rounds) < max_rounds
        if trajectory.termination in _STOPPED_BY_CHOICE and rounds_left:
            return "premature_stop"
        return "retrieval_failure"
    if not gold <= accepted_turns(trajectory):
        return "verifier_rejection"
    if _partly_answered(result.answer, result.gold_answer, result.f1):
        return "incomplete_answer"
    return "reasoning_error"


def _partly_answered(prediction: str, gold: str, f1: float) -> bool:
    parts = [p for p in re.split(r"[;,]", gold) if answer_tokens(p)]
    if len(parts) >= 2:
        predicted = set(answer_tokens(prediction))
        covered = [_token_recall(answer_tokens(p), predicted) >= 0.5 for p in parts]
        return any(covered) and not all(covered)
    return 0.0 < f1 < WRONG_F1_BELOW


def _token_recall(tokens: list[str], available: set[str]) -> float:
    return sum(t in available for t in tokens) / len(tokens) if tokens else 0.0


# ---- aggregation ---------------------------------------------------------------------------

NO_JUDGE = "none (token F1 only)"


def _mean(values: Iterable[float]) -> float | None:
    values = list(values)
    return fmean(values) if values else None


def padded_mean_by_round(curves: Sequence[Sequence[float]]) -> list[float]:
    """Mean curve over questions; a question that stopped early keeps its last value."""
    curves = [list(c) for c in curves if c]
    if not curves:
        return []
    length = max(len(c) for c in curves)
    padded = [c + [c[-1]] * (length - len(c)) for c in curves]
    return [fmean(column) for column in zip(*padded, strict=True)]


def _category_key(category: str) -> tuple[int, float | str]:
    try:
        return (0, float(category))
    except ValueError:
        return (1, category)


def aggregate_system(rows: Sequence[QuestionResult], judge: str | None = None) -> dict[str, Any]:
    """The contract metrics (DESIGN.md section 4) of one system from its per-question rows.

    ``judge`` names the judge that produced ``judged_correct`` (e.g. "llm:gpt-4o-mini");
    without one the report says ``"none (token F1 only)"`` and ``accuracy`` is null.
    Accuracy is the share of CORRECT among questions the judge gave a verdict on (LoCoMo
    category 5 is excluded by the judge; judge failures are counted in ``judge_failures``,
    never as wrong). Recall averages cover only ``QuestionResult.has_recall`` questions.
    """
    rows = list(rows)
    recall_rows = [r for r in rows if r.has_recall]
    verdicts = [r.judged_correct for r in rows if r.judged_correct is not None]
    retrieved_curve = padded_mean_by_round([r.recall_by_round for r in recall_rows])
    accepted_curve = padded_mean_by_round([r.accepted_recall_by_round for r in recall_rows])
    terminations = Counter(r.termination for r in rows)
    failures = Counter(r.failure for r in rows if r.failure is not None)
    roles = sorted({role for r in rows for role in r.tokens_by_role})
    return {
        "n_questions": len(rows),
        "f1": _mean(r.f1 for r in rows),
        "accuracy": _mean(float(v) for v in verdicts) if verdicts else None,
        "judge": judge or NO_JUDGE,
        "n_judged": len(verdicts),
        "judge_failures": sum(r.judge_error is not None for r in rows),
        "n_recall_questions": len(recall_rows),
        "evidence_recall_by_round": retrieved_curve,
        "accepted_recall_by_round": accepted_curve,
        "round1_recall": retrieved_curve[0] if retrieved_curve else None,
        "evidence_recall_final": retrieved_curve[-1] if retrieved_curve else None,
        "accepted_recall_final": accepted_curve[-1] if accepted_curve else None,
        "mean_rounds": _mean(r.rounds for r in rows),
        "mean_turns_viewed": _mean(r.turns_viewed for r in rows),
        "termination": {k: v / len(rows) for k, v in sorted(terminations.items())},
        "failure_attribution": dict(sorted(failures.items())),
        "by_category": _by_category(rows),
        "tokens_online_per_question": {
            "in": _mean(r.tokens_in for r in rows),
            "out": _mean(r.tokens_out for r in rows),
            "by_role": {
                role: {
                    "in": fmean(r.tokens_by_role.get(role, {}).get("in", 0) for r in rows),
                    "out": fmean(r.tokens_by_role.get(role, {}).get("out", 0) for r in rows),
                }
                for role in roles
            },
        },
        "seconds_per_question": _mean(r.seconds for r in rows),
    }


def _by_category(rows: list[QuestionResult]) -> dict[str, dict[str, Any]]:
    groups: dict[str, list[QuestionResult]] = {}
    for row in rows:
        groups.setdefault(row.category, []).append(row)
    out = {}
    for category in sorted(groups, key=_category_key):
        members = groups[category]
        verdicts = [float(r.judged_correct) for r in members if r.judged_correct is not None]
        curve = padded_mean_by_round([r.recall_by_round for r in members if r.has_recall])
        out[category] = {
            "n": len(members),
            "f1": fmean(r.f1 for r in members),
            "accuracy": _mean(verdicts),
            "evidence_recall_final": curve[-1] if curve else None,
        }
    return out


__all__ = [
    "DATASETS",
    "FAILURE_KINDS",
    "LOCOMO_NOT_AVAILABLE",
    "NO_JUDGE",
    "QuestionResult",
    "abstains",
    "accepted_recall_by_round",
    "aggregate_system",
    "answer_f1",
    "answer_tokens",
    "attribute_failure",
    "cumulative_recall",
    "is_wrong",
    "locomo_f1",
    "multi_answer_f1",
    "normalize_answer",
    "padded_mean_by_round",
    "porter_stem",
    "question_result",
    "recall_by_round",
    "role_tokens",
    "says_not_mentioned",
    "token_f1",
    "viewed_turns",
]
