"""The seeder: a question -> the seed evidence graph ``G_0``.

Seed nodes are the salient entities, events and concepts of the question, all marked as
anchors (the first round searches from them). When nothing can be found, the whole question
is one ``concept`` node, so the loop always has something to search from.

- ``HeuristicSeeder``: offline. Proper names (typed person / organisation / location by
  :func:`~mera_pipelines.core.graph.guess_name_type`), dates, quantities and key noun phrases.
- ``LLMSeeder``: asks a chat model for the nodes as JSON; falls back to the whole-question node
  on failure and says why in ``SeedResult.error``.

Also shared with the verifier: :func:`question_terms` (the words of a question that evidence
must cover) and :func:`light_stem`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from mera_pipelines.core.errors import ConfigError, MeraError
from mera_pipelines.core.graph import (
    NODE_TYPES,
    EvidenceGraph,
    GraphDelta,
    GraphNode,
    date_mentions,
    guess_name_type,
    label_key,
    quantity_mentions,
)
from mera_pipelines.core.llm.base import LLMBackend
from mera_pipelines.core.records import Question
from mera_pipelines.core.roles.common import (
    build_role,
    call_options,
    fence_data,
    load_prompt,
    render_messages,
    spent_tokens,
)
from mera_pipelines.core.text import (
    SMALL_TALK_WORDS,
    STOPWORDS,
    TOPIC_LEXICON,
    proper_names,
    tokenize,
)

DEFAULT_SEED_PROMPT = "seed.txt"

SEED_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "nodes": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {"label": {"type": "string"}, "type": {"type": "string"}},
                "required": ["label"],
            },
        }
    },
    "required": ["nodes"],
}


def _word_set(words: str) -> frozenset[str]:
    return frozenset(words.split())


# Words that make a question a question rather than say what it is about. Evidence need not
# contain them ("What does Nate love most about having turtles?" is about Nate, love, turtles).
QUESTION_FILLER: frozenset[str] = _word_set(
    """
    what when where who whom whose which why how whats do does did done doing have has had
    having would could should might may might likely probably ever often usually typically
    kind kinds type types sort name names many much long time times recently lately someone
    something anything thing things people person way ways one ones get got make makes made
    think thinks consider considered say said tell told mention mentioned according
    specific particular exactly also still yet both either based last next ago year years
    month months week weeks day days today yesterday tonight
    """
)
_EVENT_WORDS = TOPIC_LEXICON["events"] | _word_set(
    """trip visit vacation race marathon concert show meeting class workshop game match
    wedding party festival conference tournament competition interview adoption"""
)
_MAX_PHRASE_WORDS = 3


def light_stem(token: str) -> str:
    """Lowercase, no possessive, no plural -s ("turtles" -> "turtle", "classes" -> "class",
    "stories" -> "story"); nothing more, so unrelated words do not collide."""
    word = token.lower()
    if word.endswith("'s"):
        word = word[:-2]
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 4 and word.endswith(("ches", "shes", "sses", "xes")):
        return word[:-2]
    if len(word) > 3 and word.endswith("s") and not word.endswith(("ss", "us", "is")):
        return word[:-1]
    return word


_VOWELS = frozenset("aeiouy")
# Irregular past forms that questions ask in the present ("When did Maya meet ...?" is
# answered by "Maya met ..."): mapped to the base form before stemming.
_IRREGULAR_VERBS = {
    past: base
    for base, forms in {
        "be": "was were been",
        "begin": "began begun",
        "bring": "brought",
        "build": "built",
        "buy": "bought",
        "catch": "caught",
        "choose": "chose chosen",
        "do": "did done",
        "draw": "drew drawn",
        "drive": "drove driven",
        "eat": "ate eaten",
        "fall": "fell fallen",
        "feel": "felt",
        "find": "found",
        "fly": "flew flown",
        "get": "got gotten",
        "give": "gave given",
        "go": "went gone",
        "grow": "grew grown",
        "have": "had",
        "hear": "heard",
        "hold": "held",
        "keep": "kept",
        "know": "knew known",
        "lead": "led",
        "learn": "learnt",
        "leave": "left",
        "lose": "lost",
        "make": "made",
        "meet": "met",
        "pay": "paid",
        "ride": "rode ridden",
        "run": "ran",
        "say": "said",
        "see": "saw seen",
        "sell": "sold",
        "send": "sent",
        "sing": "sang sung",
        "sit": "sat",
        "sleep": "slept",
        "speak": "spoke spoken",
        "spend": "spent",
        "stand": "stood",
        "swim": "swam swum",
        "take": "took taken",
        "teach": "taught",
        "tell": "told",
        "think": "thought",
        "throw": "threw thrown",
        "wear": "wore worn",
        "win": "won",
        "write": "wrote written",
    }.items()
    for past in forms.split()
}
_KEEP_DOUBLE = frozenset("lsz")


def match_stem(token: str) -> str:
    """A coarser stem for matching question words against evidence words: :func:`light_stem`,
    then -ing / -ed / -er cut, a doubled final consonant undone and a final -e dropped, so
    "camped" ~ "camping" ~ "camp", "jogging" ~ "jog", "using" ~ "use", "cooker" ~ "cook".
    Irregular pasts become their base form ("met" ~ "meet"). Only for comparing."""
    word = light_stem(token)
    word = _IRREGULAR_VERBS.get(word, word)
    for suffix in ("ing", "ed", "er"):
        stem = word[: -len(suffix)]
        if word.endswith(suffix) and len(stem) >= 3 and _VOWELS & set(stem):
            word = stem
            if len(word) >= 4 and word[-1] == word[-2] and word[-1] not in _VOWELS | _KEEP_DOUBLE:
                word = word[:-1]
            break
    if len(word) > 3 and word.endswith("e"):
        word = word[:-1]
    return word


def question_terms(question_text: str) -> list[str]:
    """The stemmed content words of a question, without question filler or numbers that
    belong to dates (dates are matched as dates). In question order, no repeats."""
    masked = _mask_dates(question_text)
    terms: list[str] = []
    for token in tokenize(masked):
        if token in STOPWORDS or token in QUESTION_FILLER or "'" in token:
            continue
        if len(token) < 2 and not token.isdigit():
            continue
        stem = light_stem(token)
        if stem not in terms:
            terms.append(stem)
    return terms


def _mask_dates(text: str) -> str:
    for mention in reversed(date_mentions(text)):
        text = text[: mention.start] + " " + text[mention.end :]
    return text


# ---- the interface ---------------------------------------------------------------------------


@dataclass
class SeedResult:
    graph: EvidenceGraph
    tokens_in: int = 0
    tokens_out: int = 0
    error: str | None = None  # set when the seeder failed and the fallback node was used


class Seeder(Protocol):
    name: str

    def seed(self, question: Question) -> SeedResult: ...


def whole_question_graph(question: Question) -> EvidenceGraph:
    """The fallback ``G_0``: the whole question as one concept node, an anchor."""
    text = " ".join(question.question.split()) or "(empty question)"
    return graph_from_seeds([GraphNode("q", text, "concept", from_question=True)])


def graph_from_seeds(nodes: list[GraphNode]) -> EvidenceGraph:
    """A graph holding ``nodes`` (deduplicated by the merge rules), each an anchor."""
    graph = EvidenceGraph()
    for node in nodes:
        node.from_question = True
    graph.merge(GraphDelta(nodes=nodes, anchors_add=[n.node_id or n.label for n in nodes]))
    return graph


# ---- heuristic ---------------------------------------------------------------------------------


@dataclass
class HeuristicSeeder:
    """Names, dates, quantities and key phrases of the question (see the module docstring)."""

    max_nodes: int = 8
    name: str = field(default="heuristic", init=False)

    def __post_init__(self) -> None:
        if self.max_nodes < 1:
            raise ConfigError(f"seeder max_nodes must be >= 1, got {self.max_nodes}")

    def seed(self, question: Question) -> SeedResult:
        nodes = salient_nodes(question.question)[: self.max_nodes]
        if not nodes:
            return SeedResult(whole_question_graph(question))
        return SeedResult(graph_from_seeds(nodes))


def salient_nodes(text: str) -> list[GraphNode]:
    """Seed nodes of a question, most salient first: names, dates, quantities, phrases."""
    dates = date_mentions(text)
    date_spans = [(m.start, m.end) for m in dates]
    nodes: list[GraphNode] = []
    names = proper_names(text)
    for name in names:
        nodes.append(GraphNode(f"s{len(nodes)}", name, guess_name_type(name, text)))
    for mention in dates:
        nodes.append(GraphNode(f"s{len(nodes)}", mention.label, "date"))
    for quantity in quantity_mentions(text, exclude=date_spans):
        nodes.append(GraphNode(f"s{len(nodes)}", quantity, "quantity"))
    name_words = {light_stem(t) for name in names for t in tokenize(name)}
    quantity_words = {
        light_stem(t) for n in nodes if n.type == "quantity" for t in tokenize(n.label)
    }
    for phrase in key_phrases(_mask_dates(text), name_words | quantity_words):
        nodes.append(GraphNode(f"s{len(nodes)}", phrase, _phrase_type(phrase)))
    unique: list[GraphNode] = []
    seen: set[str] = set()
    for node in nodes:
        if label_key(node.label) not in seen:
            seen.add(label_key(node.label))
            unique.append(node)
    return unique


def key_phrases(text: str, skip_stems: set[str] = frozenset()) -> list[str]:
    """Runs of consecutive content words (no names, filler, reaction words or numbers); a
    longer run keeps its last three words, where English puts the head noun:
    "What did Maya buy at the farmers market?" -> ["buy", "farmers market"];
    "found new hiking trails" -> ["new hiking trails"]."""
    phrases: list[str] = []
    run: list[str] = []
    for token in [*tokenize(text), "."]:
        keep = (
            token not in STOPWORDS
            and token not in QUESTION_FILLER
            and token not in SMALL_TALK_WORDS
            and "'" not in token
            and len(token) > 2
            and not token.isdigit()
            and light_stem(token) not in skip_stems
        )
        if keep:
            run.append(token)
            continue
        if run:
            phrases.append(" ".join(run[-_MAX_PHRASE_WORDS:]))
        run = []
    return list(dict.fromkeys(phrases))


def _phrase_type(phrase: str) -> str:
    head = phrase.rsplit(maxsplit=1)[-1]
    if head in _EVENT_WORDS or light_stem(head) in _EVENT_WORDS:
        return "event"
    if head.endswith("ing") and len(head) > 5:  # hiking, painting, camping
        return "event"
    return "concept"


# ---- LLM ---------------------------------------------------------------------------------------


escape_fences = fence_data  # the name the seeder's tests and older callers know


class LLMSeeder:
    """Seed nodes from a chat model's JSON; the whole question when that fails."""

    name = "llm"

    def __init__(
        self,
        backend: LLMBackend,
        prompt_template: str | None = None,
        *,
        max_nodes: int = 8,
        max_tokens: int = 256,
        temperature: float = 0.0,
    ) -> None:
        if max_nodes < 1:
            raise ConfigError(f"seeder max_nodes must be >= 1, got {max_nodes}")
        self.backend = backend
        self.prompt_template = prompt_template or load_prompt(DEFAULT_SEED_PROMPT)
        self.max_nodes = max_nodes
        self.max_tokens = max_tokens
        self.temperature = temperature

    def seed(self, question: Question) -> SeedResult:
        values = {
            "question": fence_data(question.question),
            "question_date": question.question_date or "unknown",
            "node_types": ", ".join(NODE_TYPES),
            "max_nodes": str(self.max_nodes),
        }
        messages = render_messages(self.prompt_template, values)
        options = call_options(
            self.backend.complete_json,
            question.memory_id,
            schema=SEED_SCHEMA,
            max_tokens=self.max_tokens,
            temperature=self.temperature,
        )
        try:
            completion = self.backend.complete_json(messages, **options)
        except (MeraError, ValueError) as exc:
            return SeedResult(
                whole_question_graph(question),
                *spent_tokens(exc),
                error=f"{type(exc).__name__}: {exc}",
            )
        answer = completion.parsed if completion.parsed is not None else completion.text
        try:
            nodes = parse_seed_nodes(answer)[: self.max_nodes]
        except ValueError as exc:
            return SeedResult(
                whole_question_graph(question),
                completion.tokens_in,
                completion.tokens_out,
                f"invalid seed JSON: {exc}",
            )
        return SeedResult(graph_from_seeds(nodes), completion.tokens_in, completion.tokens_out)


def parse_seed_nodes(value: Any) -> list[GraphNode]:
    """``{"nodes": [{"label", "type"}]}`` -> nodes; unknown types become ``concept``.
    ValueError when no usable node is left."""
    if isinstance(value, dict):
        value = value.get("nodes")
    if not isinstance(value, list):
        raise ValueError("expected an object with a 'nodes' list")
    nodes: list[GraphNode] = []
    for entry in value:
        raw = {"label": entry} if isinstance(entry, str) else entry
        if not isinstance(raw, dict):
            continue
        label = raw.get("label")
        if not isinstance(label, str) or not label_key(label):
            continue
        nodes.append(GraphNode(f"s{len(nodes)}", " ".join(label.split()), node_type_of(raw)))
    if not nodes:
        raise ValueError("no node with a non-empty 'label'")
    return nodes


def node_type_of(raw: dict[str, Any]) -> str:
    """The node type a model gave (``raw["type"]``) as one of ``NODE_TYPES``: common variants
    mapped ("organization", "place"), anything else ``concept``."""
    node_type = str(raw.get("type", "concept")).strip().lower()
    node_type = {"organization": "organisation", "place": "location"}.get(node_type, node_type)
    return node_type if node_type in NODE_TYPES else "concept"


# ---- factories -----------------------------------------------------------------------------------

_SEEDERS = {"heuristic": HeuristicSeeder, "llm": LLMSeeder}
SEEDER_KINDS = tuple(_SEEDERS)


def make_seeder(kind: str, backend: LLMBackend | None = None, **params: Any) -> Seeder:
    """Build a seeder from configuration: ``kind`` is "heuristic" or "llm"."""
    return build_role("seeder", kind, _SEEDERS, backend, params)


__all__ = [
    "QUESTION_FILLER",
    "SEED_SCHEMA",
    "SEEDER_KINDS",
    "HeuristicSeeder",
    "LLMSeeder",
    "SeedResult",
    "Seeder",
    "escape_fences",
    "graph_from_seeds",
    "key_phrases",
    "light_stem",
    "match_stem",
    "load_prompt",
    "make_seeder",
    "node_type_of",
    "parse_seed_nodes",
    "question_terms",
    "salient_nodes",
    "whole_question_graph",
]
