"""Atomic-fact extraction: one conversation turn -> self-contained facts with keywords and topics.

Two implementations behind one interface (``FactExtractor``):

- ``HeuristicExtractor``: deterministic and offline. Sentences become facts; greetings and
  reactions are dropped; first/second person pronouns are replaced by the speakers' names;
  relative times are resolved against the turn's timestamp; an image caption becomes
  "<speaker> shared a photo of ...".
- ``LLMExtractor``: asks a chat model (any ``LLMBackend``) for JSON facts, validates them and
  resolves relative times the model left unresolved.

``extract_memory`` runs an extractor over the turns of one or more memories, gives every fact
its id and the full fact list of its parent turn, and never drops a failure silently: a turn
whose extraction fails falls back to the heuristic facts and is recorded.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import Any, Protocol

from mera_pipelines.core.errors import ConfigError, MeraError
from mera_pipelines.core.llm.base import LLMBackend
from mera_pipelines.core.llm.concurrency import ItemFailure, map_bounded
from mera_pipelines.core.records import Fact, Turn
from mera_pipelines.core.roles.common import (
    accepts_keyword,
    build_role,
    call_options,
    fence_data,
    load_prompt,
    render_messages,
    spent_tokens,
)
from mera_pipelines.core.temporal import normalise_relative_times, parse_timestamp, to_iso
from mera_pipelines.core.text import (
    TOPIC_LABELS,
    detect_topics,
    extract_keywords,
    is_small_talk,
    normalise_apostrophes,
    normalise_topic,
    split_sentences,
)

FACTS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "facts": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "fact": {"type": "string"},
                    "keywords": {"type": "array", "items": {"type": "string"}},
                    "topics": {"type": "array", "items": {"type": "string"}},
                },
                # keywords/topics are filled in when missing: a small model that forgets
                # them should not cost a re-ask or a failed turn
                "required": ["fact"],
            },
        }
    },
    "required": ["facts"],
}

DEFAULT_PROMPT_NAME = "extract_facts.txt"


# ---- the interface ---------------------------------------------------------------------------


@dataclass(frozen=True)
class TurnContext:
    """What an extractor knows about a turn besides its text."""

    speaker: str
    other_speakers: list[str]
    timestamp: datetime | None
    previous_text: str | None
    previous_speaker: str | None = None


@dataclass
class ExtractionResult:
    facts: list[Fact]
    tokens_in: int = 0
    tokens_out: int = 0
    error: str | None = None  # set when the extraction failed; facts are then not to be used


class FactExtractor(Protocol):
    name: str

    def extract(self, turn: Turn, context: TurnContext) -> ExtractionResult: ...


@dataclass(frozen=True)
class FactDraft:
    """A fact before it gets its id and its turn's fact list."""

    text: str
    keywords: list[str]
    topics: list[str]
    source_text: str


def assemble_facts(turn: Turn, context: TurnContext, drafts: Sequence[FactDraft]) -> list[Fact]:
    """Drafts -> Facts with ids ``<memory>|<turn>|<n>`` (n from 0) and the turn's fact list.

    Duplicate fact texts within the turn are dropped (an LLM sometimes repeats itself).
    """
    unique: list[FactDraft] = []
    seen: set[str] = set()
    for draft in drafts:
        key = " ".join(draft.text.lower().split())
        if key and key not in seen:
            seen.add(key)
            unique.append(draft)
    texts = [d.text for d in unique]
    timestamp = to_iso(context.timestamp) or turn.session_time
    return [
        Fact(
            fact_id=f"{turn.memory_id}|{turn.turn_id}|{n}",
            memory_id=turn.memory_id,
            turn_id=turn.turn_id,
            text=draft.text,
            keywords=list(draft.keywords),
            topics=list(draft.topics),
            speaker=turn.speaker,
            timestamp=timestamp,
            turn_facts=list(texts),
            source_text=draft.source_text,
        )
        for n, draft in enumerate(unique)
    ]


def speaker_reference(speaker: str) -> str:
    """How a fact names a speaker: LongMemEval's roles become "the user" / "the assistant"."""
    role = speaker.strip().lower()
    if role in ("user", "assistant"):
        return f"the {role}"
    return speaker.strip()


# ---- pronoun resolution ------------------------------------------------------------------------

_WORD_RE = re.compile(r"[A-Za-z]+(?:'[A-Za-z]+)?")
_CLAUSE_BREAK_RE = re.compile(r"[,;:.!?()\"\n–—-]")
_SENTENCE_BREAK_RE = re.compile(r"[.!?\n]")


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


_SKIPPABLE_ADVERBS = _words(
    """really also just always never still usually often actually totally definitely finally
    recently sometimes even only absolutely truly kinda mostly already personally honestly
    seriously rarely occasionally generally normally especially literally now currently
    sure certainly probably def constantly"""
)
_NOT_CONJUGATED = _words(
    """can could will would shall should may might must can't couldn't won't wouldn't
    shouldn't mightn't mustn't ought did didn't was wasn't had hadn't used need dare
    guys all both too and or but not to so as soon here there again back later now today
    tomorrow tonight yesterday alone well right first last more once twice"""
)
_IRREGULAR_PAST = _words(
    """went saw got made took came felt thought found gave told became left kept began
    brought bought wrote ran met sat stood heard lost paid sent built spent won taught
    caught fell held led knew grew drew threw flew drove rode ate drank swam sang forgot
    chose broke spoke woke wore tore hid meant slept fought sold understood said did was
    were had been gone seen done taken given known grown shown begun sung swum written
    ridden eaten driven chosen broken spoken forgotten gotten"""
)
_AMBIGUOUS_TENSE = _words("read put cut set let hit hurt shut quit cost bet spread cast burst beat")
_SUBJECT_OPENERS = _words(
    """and but so that because if when whenever since as or while though although unless
    until once before after where how what why who which hope think bet guess know believe
    feel wish glad sure said mean like"""
)
_AGREEMENT = {
    "am": "is",
    "are": "is",
    "were": "was",
    "weren't": "wasn't",
    "aren't": "isn't",
    "have": "has",
    "haven't": "hasn't",
    "do": "does",
    "don't": "doesn't",
}
_INVERTED_AUX = {
    "are": "is",
    "were": "was",
    "have": "has",
    "do": "does",
    "don't": "doesn't",
    "aren't": "isn't",
    "haven't": "hasn't",
    "weren't": "wasn't",
}
_HAD_AFTER_CONTRACTION = _words("been had gone done seen got gotten already")


def third_person(verb: str) -> str | None:
    """'love' -> 'loves', 'try' -> 'tries', 'watch' -> 'watches'; None when not a present verb."""
    word = verb.lower()
    if (
        not word.isalpha()
        or len(word) < 2
        or word in _NOT_CONJUGATED
        or word in _IRREGULAR_PAST
        or word in _AMBIGUOUS_TENSE
        or word in _SKIPPABLE_ADVERBS
        or word.endswith(("ed", "ing", "ly"))
    ):
        return None
    if word in ("have", "be", "do", "go"):
        out = {"have": "has", "be": "is", "do": "does", "go": "goes"}[word]
    elif word.endswith(("s", "sh", "ch", "x", "z", "o")):
        out = word + "es"
    elif word.endswith("y") and word[-2] not in "aeiou":
        out = word[:-1] + "ies"
    else:
        out = word + "s"
    return out.capitalize() if verb[0].isupper() else out


def resolve_pronouns(sentence: str, speaker: str, other: str | None) -> str:
    """Replace first person by ``speaker`` and second person by ``other`` (when known), fixing
    verb agreement: "I'm" -> "Maya is", "I love" -> "Maya loves", "my" -> "Maya's",
    "are you" -> "is Sam", "we" -> "Maya and others". Third-person pronouns are left alone.
    """
    text = normalise_apostrophes(sentence)
    words = [(m.start(), m.end(), m.group(0)) for m in _WORD_RE.finditer(text)]
    out: dict[int, str] = {}

    def gap_before(i: int) -> str:
        return text[words[i - 1][1] : words[i][0]] if i > 0 else text[: words[0][0]]

    def at_sentence_start(i: int) -> bool:
        return i == 0 or bool(_SENTENCE_BREAK_RE.search(gap_before(i)))

    def name(ref: str, i: int, suffix: str = "") -> str:
        value = ref + suffix
        return value[0].upper() + value[1:] if at_sentence_start(i) else value

    def next_verb_index(i: int) -> int | None:
        j = i + 1
        while j < len(words) and j - i <= 3:
            if _CLAUSE_BREAK_RE.search(text[words[j - 1][1] : words[j][0]]):
                return None
            if words[j][2].lower() not in _SKIPPABLE_ADVERBS:
                return j
            j += 1
        return None

    def agree_following_verb(i: int, allow_am: bool) -> None:
        j = next_verb_index(i)
        if j is None or j in out:
            return
        verb = words[j][2]
        key = verb.lower()
        if key in _AGREEMENT and (allow_am or key != "am"):
            out[j] = _AGREEMENT[key]
        elif (conjugated := third_person(verb)) is not None:
            out[j] = conjugated

    def is_subject_position(i: int) -> bool:
        if i == 0 or _CLAUSE_BREAK_RE.search(gap_before(i)):
            return True
        return words[i - 1][2].lower() in _SUBJECT_OPENERS

    for i, (start, end, word) in enumerate(words):
        if i in out:
            continue
        key = word.lower()
        after = text[end : end + 2]
        before = text[start - 1 : start] if start else ""
        if after.startswith("-") or before == "-" or (key == "i" and re.match(r"\.\w", after)):
            continue  # "I-95", "me-time", "i.e."
        if key in ("i", "i'm", "i've", "i'll", "i'd"):
            out[i] = _first_person_subject(key, i, words, speaker, name)
            if key == "i" and not _in_compound_subject(text, words, i):
                agree_following_verb(i, allow_am=True)
        elif key == "me":
            out[i] = name(speaker, i)
        elif key == "myself":  # "Maya made it Maya" reads badly: reflexive once named
            out[i] = "themself" if _named_before(out, i, speaker) else name(speaker, i)
        elif key in ("my", "mine"):
            out[i] = name(speaker, i, "'s")
        elif key in ("we", "we're", "we've", "we'll", "we'd") or (word in ("us", "Us")):
            tail = {"we're": " are", "we've": " have", "we'll": " will", "we'd": " would"}
            out[i] = name(speaker, i, " and others" + tail.get(key, ""))
        elif key in ("our", "ours"):
            out[i] = name(speaker, i, "'s")
        elif key == "ourselves":
            out[i] = "themselves"
        elif other is None:
            continue
        elif key in ("you're", "you've", "you'll", "you'd"):
            out[i] = _second_person_contraction(key, i, words, other, name)
        elif key in ("your", "yours"):
            out[i] = name(other, i, "'s")
        elif key in ("yourself", "yourselves"):
            out[i] = "themself" if _named_before(out, i, other) else name(other, i)
        elif key == "you":
            prev = words[i - 1][2].lower() if i > 0 else ""
            adjacent = i > 0 and not _CLAUSE_BREAK_RE.search(gap_before(i))
            if adjacent and prev in _INVERTED_AUX and (i - 1) not in out:
                out[i - 1] = _match_case(_INVERTED_AUX[prev], words[i - 1][2])
                out[i] = other
            else:
                out[i] = name(other, i)
                if is_subject_position(i):
                    agree_following_verb(i, allow_am=False)
    return _rebuild(text, words, out)


_POSSESSIVES = _words("my his her their our your the")
_OBJECT_PRONOUNS = _words("he she they you we him her them me")


def _in_compound_subject(text: str, words: list[tuple[int, int, str]], i: int) -> bool:
    """Whether "I" is part of "Mel and I" / "my husband and I" (plural verb follows)."""
    if i < 2 or words[i - 1][2].lower() not in ("and", "or"):
        return False
    if _CLAUSE_BREAK_RE.search(text[words[i - 2][1] : words[i - 1][0]]):
        return False  # "..., and I know": a new clause
    before = words[i - 2][2]
    determiner = words[i - 3][2].lower() if i >= 3 else ""
    return before[0].isupper() or before.lower() in _OBJECT_PRONOUNS or determiner in _POSSESSIVES


def _named_before(out: dict[int, str], i: int, ref: str) -> bool:
    return any(k < i and v.lower().startswith(ref.lower()) for k, v in out.items())


def _first_person_subject(
    key: str, i: int, words: list[tuple[int, int, str]], speaker: str, name: Callable[..., str]
) -> str:
    if key == "i":
        return name(speaker, i)
    if key == "i'd":
        nxt = words[i + 1][2].lower() if i + 1 < len(words) else ""
        return name(speaker, i, " had" if nxt in _HAD_AFTER_CONTRACTION else " would")
    return name(speaker, i, {"i'm": " is", "i've": " has", "i'll": " will"}[key])


def _second_person_contraction(
    key: str, i: int, words: list[tuple[int, int, str]], other: str, name: Callable[..., str]
) -> str:
    if key == "you'd":
        nxt = words[i + 1][2].lower() if i + 1 < len(words) else ""
        return name(other, i, " had" if nxt in _HAD_AFTER_CONTRACTION else " would")
    return name(other, i, {"you're": " is", "you've": " has", "you'll": " will"}[key])


def _match_case(replacement: str, original: str) -> str:
    return replacement.capitalize() if original[:1].isupper() else replacement


def _rebuild(text: str, words: list[tuple[int, int, str]], out: dict[int, str]) -> str:
    pieces: list[str] = []
    cursor = 0
    for i in sorted(out):
        start, end, _ = words[i]
        pieces.append(text[cursor:start])
        pieces.append(out[i])
        cursor = end
    pieces.append(text[cursor:])
    return "".join(pieces)


# ---- the heuristic extractor -------------------------------------------------------------------

_CAPTION_PREFIX_RE = re.compile(
    r"^\s*(?:a|an|the)?\s*(?:photo|photograph|photography|picture|image|pic)\s+of\s+", re.I
)
_SOFT_BREAK_RE = re.compile(r"(?<=[;:])\s+|(?<=,)\s+(?=(?:and|but|so|which|because|while)\b)")


@dataclass
class HeuristicExtractor:
    """Deterministic, offline fact extraction (see the module docstring)."""

    max_facts: int = 12
    max_sentence_chars: int = 400
    max_keywords: int = 8
    name: str = field(default="heuristic", init=False)

    def __post_init__(self) -> None:
        if self.max_facts < 1:
            raise ConfigError(f"extractor max_facts must be >= 1, got {self.max_facts}")
        if self.max_sentence_chars < 40:
            raise ConfigError(
                f"extractor max_sentence_chars must be >= 40, got {self.max_sentence_chars}"
            )

    def extract(self, turn: Turn, context: TurnContext) -> ExtractionResult:
        speaker = speaker_reference(context.speaker)
        other = _single_other(context)
        names = [context.speaker, *context.other_speakers]
        pieces = [
            piece
            for sentence in split_sentences(turn.text)
            if not is_small_talk(sentence, names)
            for piece in bound_length(sentence, self.max_sentence_chars)
        ]
        caption = (turn.image_caption or "").strip()
        pieces = pieces[: self.max_facts - (1 if caption else 0)]
        drafts = [
            self._draft(piece, source=piece, speaker=speaker, other=other, context=context)
            for piece in pieces
        ]
        if caption:
            shown = _CAPTION_PREFIX_RE.sub("", caption).rstrip(". ")
            drafts.append(
                self._draft(
                    f"{speaker} shared a photo of {shown}.",
                    source=caption,
                    speaker=speaker,
                    other=None,
                    context=context,
                )
            )
        if not drafts:  # every turn keeps at least one fact, so every turn stays retrievable
            whole = " ".join(turn.text.split()) or "(an empty message)"
            drafts.append(
                self._draft(
                    whole,
                    source=turn.text,
                    speaker=speaker,
                    other=other,
                    context=context,
                    whole_turn=True,
                )
            )
        return ExtractionResult(facts=assemble_facts(turn, context, drafts))

    def _draft(
        self,
        sentence: str,
        *,
        source: str,
        speaker: str,
        other: str | None,
        context: TurnContext,
        whole_turn: bool = False,
    ) -> FactDraft:
        """One fact from one sentence (or, with ``whole_turn``, from a turn with no fact:
        kept verbatim, pronouns resolved, attributed with "<speaker> said:" or "asked:")."""
        if whole_turn:
            text = resolve_pronouns(sentence, speaker, other)
        else:
            vocatives = [context.speaker, *context.other_speakers]
            plain = restore_dropped_subject(strip_interjections(sentence, vocatives), speaker)
            text = resolve_pronouns(plain, speaker, other)
        names = [speaker, context.speaker, *context.other_speakers]
        keywords = keywords_with_speaker(text, context.speaker, names, self.max_keywords)
        topics = detect_topics(text)
        if whole_turn:
            verb = "asked" if text.rstrip().endswith("?") else "said"
            text = f"{_capital(speaker)} {verb}: {text}"
        else:
            text = _attribute(text, speaker)
        normalised, _ = normalise_relative_times(text, context.timestamp)
        return FactDraft(normalised, keywords, topics, source)


# Openers that carry no fact: pure interjections go with or without punctuation, reactions
# and names (vocatives) only when punctuation follows ("Great, ..." but not "Great Barrier").
_PURE_INTERJECTIONS = (
    r"yeah|yes|yep|yup|well|oh|ooh|wow|whoa|haha+|hehe|lol|hey|hi|hello|so|ok|okay|aw+|omg|"
    r"hmm+|ah|phew|anyway"
)
_REACTIONS = (
    r"sure|definitely|totally|absolutely|true|right|indeed|honestly|thanks|cool|nice|great|"
    r"awesome|amazing|exactly|agreed"
)


def strip_interjections(sentence: str, names: Sequence[str] = ()) -> str:
    """ "Yeah, that's why I love it" -> "That's why I love it"; "Hey John, great news - ..."
    -> "Great news - ..."; "I'm here for you, Jo!" -> "I'm here for you!" (with "Jo" in
    ``names``). A sentence that is nothing but openers is returned unchanged."""
    vocatives = "|".join(re.escape(n) for n in names if n)
    with_punctuation = _REACTIONS + (f"|{vocatives}" if vocatives else "")
    opener = re.compile(
        rf"^(?:(?:(?:{_PURE_INTERJECTIONS})\b[,!.]*|(?:{with_punctuation})\b[,!.]+)\s+)+",
        re.IGNORECASE,
    )
    stripped = opener.sub("", sentence)
    if vocatives:  # "..., Joanna!" at the end
        stripped = re.sub(rf",\s*(?:{vocatives})\s*([.!?]*)\s*$", r"\1", stripped)
    if not re.search(r"[^\W_]", stripped):
        return sentence
    return stripped[0].upper() + stripped[1:]


# Chat drops the subject "I": "Just got back from Rome", "Been busy", "Love the view".
_DROPPED_SUBJECT_ADVERBS = _words("just finally recently also really totally still always never")
_DROPPED_SUBJECT_MENTAL = _words(
    "love like need want hope think miss wish guess know agree appreciate"
)
_DROPPED_SUBJECT_PROGRESSIVE = _words(
    "loving enjoying thinking hoping planning working looking trying feeling going heading"
)
_DROPPED_SUBJECT_STATES = _words(
    """excited stoked pumped psyched blessed impressed thrilled tired exhausted stressed bored
    scared worried pleased amazed interested inspired motivated determined relieved
    overwhelmed surprised shocked delighted honored honoured obsessed hooked"""
)
_FINITE_VERB_RE = re.compile(r"\b(?:is|was|are|were|has|have)\b", re.IGNORECASE)


def restore_dropped_subject(sentence: str, speaker: str) -> str:
    """Put back the speaker as the subject chat left out: "Just got back from Rome" ->
    "Maya just got back from Rome"; "Been busy" -> "Maya has been busy"; "Love the view"
    -> "Maya loves the view"; "Excited to start" -> "Maya is excited to start". Questions,
    imperatives ("Keep going") and gerund subjects ("Watching it was fun") are left alone."""
    match = _OPENING_RE.match(sentence)
    if match is None or sentence.rstrip().endswith("?"):
        return sentence
    adverb = (match["adverb"] or "").lower()
    key, rest = match["first"].lower(), match["rest"]
    head = _capital(speaker)
    if key == "been" and not re.match(r"\s+(?:a|an|the|so|such|ages|forever)\b", rest, re.I):
        return f"{head} {adverb}has been{rest}"
    if key in _DROPPED_SUBJECT_STATES or (
        key in _DROPPED_SUBJECT_PROGRESSIVE and not _FINITE_VERB_RE.search(rest)
    ):
        return f"{head} is {adverb}{key}{rest}"
    if key in _DROPPED_SUBJECT_MENTAL:
        return f"{head} {adverb}{third_person(key)}{rest}"
    is_past = key in _IRREGULAR_PAST or (key.endswith("ed") and key.isalpha())
    if is_past and key not in ("was", "were", "did", "been"):
        return f"{head} {adverb}{key}{rest}"
    return sentence


_OPENING_RE = re.compile(
    rf"^(?P<adverb>(?:{'|'.join(sorted(_DROPPED_SUBJECT_ADVERBS))})\s+)?"
    r"(?P<first>[A-Za-z]+)(?P<rest>.*)$",
    re.IGNORECASE | re.DOTALL,
)


def _single_other(context: TurnContext) -> str | None:
    """Who "you" is: only decidable with exactly one other participant."""
    others = [s for s in context.other_speakers if s != context.speaker]
    return speaker_reference(others[0]) if len(others) == 1 else None


def _attribute(text: str, speaker: str) -> str:
    """Make a fact say who said it when the sentence itself does not: questions become
    "<speaker> asked: ...", other sentences without the speaker "<speaker> said: ..."."""
    if text.rstrip().endswith("?"):
        return f"{_capital(speaker)} asked: {text}"
    if re.search(rf"\b{re.escape(speaker)}\b", text, re.IGNORECASE):
        return text
    return f"{_capital(speaker)} said: {text}"


def _capital(text: str) -> str:
    return text[:1].upper() + text[1:]


def keywords_with_speaker(
    text: str, speaker: str, names: Sequence[str], max_keywords: int
) -> list[str]:
    """The speaker's name first (LongMemEval roles as "user"/"assistant"), then the text's
    keywords; case-insensitive dedup."""
    out = [speaker]
    seen = {speaker.lower()}
    for keyword in extract_keywords(text, max_keywords, known_names=names):
        if keyword.lower() not in seen and keyword.lower() not in ("the user", "the assistant"):
            seen.add(keyword.lower())
            out.append(keyword)
    return out[:max_keywords]


def bound_length(sentence: str, max_chars: int) -> list[str]:
    """Split an over-long sentence at ';', ':' or ', and/but/so ...', then at word
    boundaries, so that no piece exceeds ``max_chars``; nothing is cut away."""
    if len(sentence) <= max_chars:
        return [sentence]
    pieces: list[str] = []
    current = ""
    for part in _SOFT_BREAK_RE.split(sentence):
        candidate = f"{current} {part}".strip()
        if len(candidate) <= max_chars:
            current = candidate
            continue
        if current:
            pieces.append(current)
        current = part
        while len(current) > max_chars:
            cut = current.rfind(" ", 0, max_chars)
            cut = cut if cut > 0 else max_chars
            pieces.append(current[:cut].strip())
            current = current[cut:].strip()
    if current:
        pieces.append(current)
    return pieces


# ---- the LLM extractor -------------------------------------------------------------------------


def load_default_prompt() -> str:
    """The packaged prompt template ``prompts/extract_facts.txt``."""
    return load_prompt(DEFAULT_PROMPT_NAME)


def extraction_prompt_values(turn: Turn, context: TurnContext, max_facts: int) -> dict[str, str]:
    speaker = speaker_reference(context.speaker)
    others = [speaker_reference(s) for s in context.other_speakers]
    other = others[0] if len(others) == 1 else "the other participants"
    when = context.timestamp.strftime("%Y-%m-%d (%A) %H:%M") if context.timestamp else "unknown"
    previous = "(none: this is the first turn of the session)"
    if context.previous_text:
        who = speaker_reference(context.previous_speaker) if context.previous_speaker else "?"
        previous = f"{who}: {context.previous_text.strip()[:600]}"
    caption = (turn.image_caption or "").strip()
    return {
        "speaker": speaker,
        "other_speakers": ", ".join(others) or "(none)",
        "other_ref": other,
        "date": when,
        "previous_turn": fence_data(previous),
        "turn_text": fence_data(turn.text) or "(empty)",
        "image_caption": fence_data(caption) if caption else "(no photo)",
        "max_facts": str(max_facts),
        "topic_labels": ", ".join(TOPIC_LABELS),
    }


def parse_fact_items(value: Any) -> list[dict[str, Any]]:
    """Validate the model's answer; returns [{"fact", "keywords", "topics"}]. ValueError if the
    shape is wrong. Accepts a bare list and plain strings, which small models often produce."""
    if isinstance(value, str):
        value = json.loads(value)
    if isinstance(value, dict):
        value = value.get("facts")
    if not isinstance(value, list):
        raise ValueError("expected an object with a 'facts' list")
    items: list[dict[str, Any]] = []
    for entry in value:
        raw = {"fact": entry} if isinstance(entry, str) else entry
        if not isinstance(raw, dict):
            continue
        text = raw.get("fact", raw.get("text"))
        if not isinstance(text, str) or not text.strip():
            continue
        items.append(
            {
                "fact": " ".join(text.split()),
                "keywords": _strings(raw.get("keywords")),
                "topics": _strings(raw.get("topics")),
            }
        )
    if value and not items:
        raise ValueError("no item of 'facts' has a non-empty 'fact' string")
    return items


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list):
        return []
    return [" ".join(v.split()) for v in value if isinstance(v, str) and v.strip()]


class LLMExtractor:
    """Facts from a chat model's JSON answer; relative times it left are resolved here."""

    name = "llm"

    def __init__(
        self,
        backend: LLMBackend,
        prompt_template: str | None = None,
        *,
        max_facts: int = 12,
        max_keywords: int = 8,
        max_tokens: int = 1024,
        temperature: float = 0.0,
    ) -> None:
        if max_facts < 1:
            raise ConfigError(f"extractor max_facts must be >= 1, got {max_facts}")
        self.backend = backend
        self.prompt_template = prompt_template or load_default_prompt()
        self.max_facts = max_facts
        self.max_keywords = max_keywords
        self.max_tokens = max_tokens
        self.temperature = temperature

    def extract(self, turn: Turn, context: TurnContext) -> ExtractionResult:
        values = extraction_prompt_values(turn, context, self.max_facts)
        messages = render_messages(self.prompt_template, values)
        options = call_options(
            self.backend.complete_json,
            turn.memory_id,
            schema=FACTS_SCHEMA,
            max_tokens=self.max_tokens,
            temperature=self.temperature,
        )
        try:
            completion = self.backend.complete_json(messages, **options)
        except (MeraError, ValueError) as exc:
            tokens_in, tokens_out = spent_tokens(exc)
            return ExtractionResult([], tokens_in, tokens_out, error=f"{type(exc).__name__}: {exc}")
        try:
            answer = completion.parsed if completion.parsed is not None else completion.text
            items = parse_fact_items(answer)
        except ValueError as exc:  # json.JSONDecodeError is a ValueError
            return ExtractionResult(
                [], completion.tokens_in, completion.tokens_out, f"invalid facts JSON: {exc}"
            )
        drafts = [self._draft(item, turn, context) for item in items[: self.max_facts]]
        return ExtractionResult(
            assemble_facts(turn, context, drafts), completion.tokens_in, completion.tokens_out
        )

    def _draft(self, item: dict[str, Any], turn: Turn, context: TurnContext) -> FactDraft:
        text, _ = normalise_relative_times(item["fact"], context.timestamp)
        names = [speaker_reference(context.speaker), context.speaker, *context.other_speakers]
        keywords = _dedup([context.speaker, *item["keywords"]])
        if len(keywords) == 1:
            keywords = keywords_with_speaker(text, context.speaker, names, self.max_keywords)
        topics = _dedup([t for t in map(normalise_topic, item["topics"]) if t])
        return FactDraft(
            text, keywords[: self.max_keywords], topics or detect_topics(text), turn.text
        )


def _dedup(values: Sequence[str]) -> list[str]:
    seen: set[str] = set()
    out = []
    for value in values:
        if value.lower() not in seen:
            seen.add(value.lower())
            out.append(value)
    return out


# ---- the factory ---------------------------------------------------------------------------

_EXTRACTORS = {"heuristic": HeuristicExtractor, "llm": LLMExtractor}
EXTRACTOR_KINDS = tuple(_EXTRACTORS)


def make_extractor(kind: str, backend: LLMBackend | None = None, **params: Any) -> FactExtractor:
    """Build an extractor from configuration: ``kind`` is "heuristic" or "llm"."""
    return build_role("fact extractor", kind, _EXTRACTORS, backend, params)


# ---- running an extractor over memories ------------------------------------------------------


@dataclass(frozen=True)
class ExtractionFailure:
    turn_id: str
    reason: str


@dataclass
class MemoryStats:
    """Per-memory accounting. ``fallbacks``: turns whose extraction failed and got heuristic
    facts instead (each listed in ``failures``); ``filled_empty``: turns for which the
    extractor returned no fact at all, given heuristic facts so they stay retrievable."""

    memory_id: str
    extractor: str
    turns: int = 0
    facts: int = 0
    tokens_in: int = 0
    tokens_out: int = 0
    fallbacks: int = 0
    filled_empty: int = 0
    failures: list[ExtractionFailure] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class MemoryExtraction:
    facts: list[Fact]
    stats: dict[str, MemoryStats]  # by memory id, in input order
    seconds: float = 0.0

    def totals(self) -> dict[str, Any]:
        keys = ("turns", "facts", "tokens_in", "tokens_out", "fallbacks", "filled_empty")
        totals: dict[str, Any] = {k: sum(getattr(s, k) for s in self.stats.values()) for k in keys}
        totals["memories"] = len(self.stats)
        totals["seconds"] = round(self.seconds, 3)
        totals["facts_per_turn"] = totals["facts"] / totals["turns"] if totals["turns"] else 0.0
        return totals


@dataclass(frozen=True)
class _TurnOutcome:
    facts: list[Fact]
    tokens_in: int
    tokens_out: int
    failure: str | None
    filled_empty: bool


def build_contexts(turns: Sequence[Turn]) -> list[tuple[Turn, TurnContext]]:
    """Turns in memory order (memories as first seen; sessions and turns in time order),
    each with its context: the other participants of its memory and the previous turn of
    its session."""
    by_memory: dict[str, list[Turn]] = {}
    for turn in turns:
        by_memory.setdefault(turn.memory_id, []).append(turn)
    ordered: list[tuple[Turn, TurnContext]] = []
    for memory_turns in by_memory.values():
        speakers = list(dict.fromkeys(t.speaker for t in memory_turns))
        previous: Turn | None = None
        for turn in sorted(memory_turns, key=lambda t: (t.session_index, t.turn_index)):
            same_session = previous is not None and previous.session_id == turn.session_id
            context = TurnContext(
                speaker=turn.speaker,
                other_speakers=[s for s in speakers if s != turn.speaker],
                timestamp=parse_timestamp(turn.session_time)
                or parse_timestamp(turn.session_time_raw),
                previous_text=previous.text if same_session and previous else None,
                previous_speaker=previous.speaker if same_session and previous else None,
            )
            ordered.append((turn, context))
            previous = turn
    return ordered


def extract_memory(
    turns: Sequence[Turn],
    extractor: FactExtractor,
    concurrency: int = 1,
    progress: bool = True,
    fallback: FactExtractor | None = None,
) -> MemoryExtraction:
    """Run ``extractor`` over every turn (of one or several memories) and collect facts + stats.

    A failed turn (an error result or an exception) gets ``fallback``'s facts (the heuristic
    extractor by default) and is recorded in its memory's ``failures``. A failure of the
    heuristic extractor itself is a bug and is raised.
    """
    if concurrency < 1:
        raise ConfigError(f"extraction concurrency must be >= 1, got {concurrency}")
    fallback = fallback or HeuristicExtractor()
    jobs = build_contexts(turns)
    started = time.perf_counter()

    def run(job: tuple[Turn, TurnContext]) -> _TurnOutcome:
        return _extract_turn(job[0], job[1], extractor, fallback)

    outcomes = map_bounded(run, jobs, concurrency, f"facts ({extractor.name})", progress)
    for outcome in outcomes:
        if isinstance(outcome, ItemFailure):  # only the fallback itself can fail here: a bug
            raise outcome.error

    stats: dict[str, MemoryStats] = {}
    facts: list[Fact] = []
    for (turn, _), outcome in zip(jobs, outcomes, strict=True):
        assert isinstance(outcome, _TurnOutcome)
        memory = stats.setdefault(turn.memory_id, MemoryStats(turn.memory_id, extractor.name))
        memory.turns += 1
        memory.facts += len(outcome.facts)
        memory.tokens_in += outcome.tokens_in
        memory.tokens_out += outcome.tokens_out
        memory.filled_empty += int(outcome.filled_empty)
        if outcome.failure is not None:
            memory.fallbacks += 1
            memory.failures.append(ExtractionFailure(turn.turn_id, outcome.failure))
        facts.extend(outcome.facts)
    return MemoryExtraction(facts, stats, time.perf_counter() - started)


def _extract_turn(
    turn: Turn, context: TurnContext, extractor: FactExtractor, fallback: FactExtractor
) -> _TurnOutcome:
    is_fallback_itself = extractor is fallback or isinstance(extractor, HeuristicExtractor)
    try:
        result = extractor.extract(turn, context)
    except Exception as exc:
        if is_fallback_itself:
            raise
        result = ExtractionResult([], error=f"{type(exc).__name__}: {exc}")
    if result.error is None and result.facts:
        return _TurnOutcome(
            _finalise(turn, context, result.facts), result.tokens_in, result.tokens_out, None, False
        )
    backup = fallback.extract(turn, context)
    return _TurnOutcome(
        _finalise(turn, context, backup.facts),
        result.tokens_in,
        result.tokens_out,
        result.error,
        filled_empty=result.error is None,
    )


def _finalise(turn: Turn, context: TurnContext, facts: list[Fact]) -> list[Fact]:
    """Enforce the id and turn_facts invariants whatever extractor produced the facts."""
    drafts = [FactDraft(f.text, f.keywords, f.topics, f.source_text) for f in facts]
    return assemble_facts(turn, context, drafts)


__all__ = [
    "EXTRACTOR_KINDS",
    "FACTS_SCHEMA",
    "ExtractionFailure",
    "ExtractionResult",
    "FactDraft",
    "FactExtractor",
    "HeuristicExtractor",
    "LLMExtractor",
    "MemoryExtraction",
    "MemoryStats",
    "TurnContext",
    "accepts_keyword",
    "assemble_facts",
    "build_contexts",
    "extract_memory",
    "make_extractor",
    "load_default_prompt",
    "parse_fact_items",
    "render_messages",
    "resolve_pronouns",
    "restore_dropped_subject",
    "speaker_reference",
    "strip_interjections",
    "third_person",
]
