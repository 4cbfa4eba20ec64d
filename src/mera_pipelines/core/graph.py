"""The question-specific evidence graph ``G_t = (V, L, X, D, Psi)`` of MERA.

- ``V`` typed nodes (:data:`NODE_TYPES`), each with attributes whose conflicting values are kept
  as versions in turn-time order;
- ``L`` directed labelled relations between nodes;
- ``X`` active anchors: node ids a planner should search from next;
- ``D`` exhausted directions: invalid because admitted evidence contradicts them (with the
  turn ids that do), or exhausted after a fruitless search (no turn ids);
- ``Psi`` provenance: the source turn ids of every node and relation.

The graph only grows through :meth:`EvidenceGraph.merge` of a :class:`GraphDelta` (what a
verifier returns), which reuses matching entities, deduplicates relations and keeps conflicting
attribute values as versions. ``to_text`` is what a planner reads; ``to_dict`` / ``from_dict``
is what training stores (JSON, exact round trip).

Also here: :func:`guess_name_type` and :func:`date_mentions`, the typing rules the heuristic
seeder and verifier share, so both put the same name under the same node type.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from mera_pipelines.core.text import normalise_apostrophes

NODE_TYPES: tuple[str, ...] = (
    "person",
    "organisation",
    "location",
    "event",
    "date",
    "quantity",
    "state",
    "concept",
)
# Heuristic name typing confuses these three, so a name seen as a person in one turn and as a
# location in another is still one node.
NAMED_TYPES = frozenset({"person", "organisation", "location"})
ABSTRACT_TYPES = frozenset({"event", "state", "concept"})
# Relations whose direction carries no meaning: stored once, endpoints in node-id order.
SYMMETRIC_RELATIONS = frozenset({"co-occurs"})
DIRECTION_KINDS = ("invalid", "exhausted")
GRAPH_FORMAT_VERSION = 1


# ---- records ---------------------------------------------------------------------------------


@dataclass
class AttributeVersion:
    """One value of an attribute as one turn states it. ``time`` is the turn's timestamp (when
    it was said), not the time of the event the value describes."""

    value: str
    turn_id: str
    time: str | None = None


@dataclass
class GraphNode:
    """A typed node. ``from_question`` marks seed nodes (taken from the question, not from
    evidence); ``aliases`` are other surface forms merged into it ("Jonas" for "Jonas Berg")."""

    node_id: str
    label: str
    type: str
    attributes: dict[str, list[AttributeVersion]] = field(default_factory=dict)
    provenance: set[str] = field(default_factory=set)
    aliases: set[str] = field(default_factory=set)
    from_question: bool = False


@dataclass
class Relation:
    """``source_id -[label]-> target_id``. In a :class:`GraphDelta` the endpoints may be
    labels instead of ids (see there)."""

    source_id: str
    label: str
    target_id: str
    provenance: set[str] = field(default_factory=set)


@dataclass
class Direction:
    """A search direction that is no longer worth following.

    ``kind="invalid"``: admitted evidence contradicts it; ``turn_ids`` are that evidence and
    must not be empty. ``kind="exhausted"``: searched without result (no turn ids).
    """

    text: str
    reason: str
    turn_ids: list[str] = field(default_factory=list)
    kind: str = "invalid"


@dataclass
class GraphDelta:
    """What one verification adds to the graph.

    Node references (``Relation.source_id`` / ``target_id``, ``anchors_add``,
    ``anchors_retire``) may each be (in this order of lookup) the ``node_id`` of a node in
    this delta, the id of a node already in the graph, or a label, matched like a node label
    (case, possessive and first-name aliases). A relation endpoint that matches nothing
    becomes a new ``concept`` node; an anchor that matches nothing is ignored. Delta node ids
    are local names only: merged nodes get graph ids.
    """

    nodes: list[GraphNode] = field(default_factory=list)
    relations: list[Relation] = field(default_factory=list)
    anchors_add: list[str] = field(default_factory=list)
    anchors_retire: list[str] = field(default_factory=list)
    invalid_directions: list[Direction] = field(default_factory=list)

    def is_empty(self) -> bool:
        return not (
            self.nodes
            or self.relations
            or self.anchors_add
            or self.anchors_retire
            or self.invalid_directions
        )


@dataclass
class MergeStats:
    nodes_added: int = 0
    nodes_reused: int = 0
    relations_added: int = 0
    versions_added: int = 0
    anchors_added: int = 0
    anchors_retired: int = 0
    directions_added: int = 0
    directions_rejected: int = 0  # "invalid" directions without contradicting evidence
    provenance_added: int = 0  # new source turns on existing nodes/relations

    @property
    def changed(self) -> bool:
        """Whether the merge changed the graph at all (the loop's "no graph update" test)."""
        return any(
            (
                self.nodes_added,
                self.relations_added,
                self.versions_added,
                self.anchors_added,
                self.anchors_retired,
                self.directions_added,
                self.provenance_added,
            )
        )


# ---- label normalisation and matching ----------------------------------------------------------

_LEADING_ARTICLE_RE = re.compile(r"^(?:the|a|an)\s+")
_NON_WORD_RE = re.compile(r"[^\w\s-]+")


def label_key(label: str) -> str:
    """The form labels are compared in: lowercase, no possessive, no punctuation, no leading
    article, single spaces ("The Maya's!" -> "maya")."""
    text = normalise_apostrophes(label).lower().strip()
    text = re.sub(r"'s\b|s'(?=\s|$)", lambda m: "" if m.group(0) == "'s" else "s", text)
    text = _NON_WORD_RE.sub(" ", text)
    text = " ".join(text.split())
    return _LEADING_ARTICLE_RE.sub("", text)


def types_compatible(first: str, second: str) -> bool:
    """Whether nodes of these types may be one entity (see :data:`NAMED_TYPES`)."""
    if first == second:
        return True
    if first in NAMED_TYPES and second in NAMED_TYPES:
        return True
    if first in ABSTRACT_TYPES and second in ABSTRACT_TYPES:
        return True
    # "concept" is what a parser says when it does not know: it may turn out a name.
    return "concept" in (first, second) and not {first, second} & {"date", "quantity"}


def _more_specific(current: str, incoming: str) -> str:
    """The type to keep when two compatible nodes merge: anything beats "concept"."""
    return incoming if current == "concept" and incoming != "concept" else current


# ---- the graph ---------------------------------------------------------------------------------


@dataclass
class EvidenceGraph:
    """``G_t``. Build it empty (or from a seeder) and grow it with :meth:`merge`."""

    nodes: dict[str, GraphNode] = field(default_factory=dict)
    relations: list[Relation] = field(default_factory=list)
    anchors: list[str] = field(default_factory=list)  # active, oldest first
    exhausted: list[Direction] = field(default_factory=list)
    # Every anchor ever added, in order, so a planner can ask what is new since a mark.
    anchor_log: list[str] = field(default_factory=list)
    next_id: int = 1

    # ------------------------------------------------------------------ reading
    def size(self) -> tuple[int, int]:
        return len(self.nodes), len(self.relations)

    def node(self, node_id: str) -> GraphNode:
        return self.nodes[node_id]

    def anchor_nodes(self) -> list[GraphNode]:
        return [self.nodes[a] for a in self.anchors]

    def anchor_labels(self) -> list[str]:
        return [self.nodes[a].label for a in self.anchors]

    def mark(self) -> int:
        """A position in the anchor history; pass it to :meth:`new_anchors_since` later."""
        return len(self.anchor_log)

    def new_anchor_ids_since(self, mark: int) -> list[str]:
        """Ids of anchors added after ``mark`` that are still active (oldest first)."""
        active = set(self.anchors)
        return [a for a in dict.fromkeys(self.anchor_log[mark:]) if a in active]

    def new_anchors_since(self, mark: int) -> list[str]:
        """Labels of the anchors added after ``mark`` and still active: what a planner should
        search next (``mark = graph.mark()`` before the verifier's delta is merged)."""
        return [self.nodes[a].label for a in self.new_anchor_ids_since(mark)]

    def find(self, label: str, type_: str | None = None) -> GraphNode | None:
        """The node a label refers to: exact normalised label or alias, else a unique
        first-name match among named nodes ("Jonas" -> "Jonas Berg"), with a compatible type."""
        node_id = self._match(label, type_)
        return self.nodes[node_id] if node_id else None

    def provenance(self) -> set[str]:
        """Every source turn id in the graph."""
        turns: set[str] = set()
        for node in self.nodes.values():
            turns |= node.provenance
        for relation in self.relations:
            turns |= relation.provenance
        return turns

    def is_exhausted(self, text: str) -> bool:
        key = label_key(text)
        return any(label_key(d.text) == key for d in self.exhausted)

    # ------------------------------------------------------------------ writing
    def merge(self, delta: GraphDelta) -> MergeStats:
        """Add ``delta``; see :class:`GraphDelta` for how references resolve."""
        stats = MergeStats()
        local: dict[str, str] = {}  # delta node id or label key -> graph node id
        for incoming in delta.nodes:
            graph_id = self._merge_node(incoming, stats)
            if incoming.node_id:
                local[incoming.node_id] = graph_id
            local.setdefault(label_key(incoming.label), graph_id)
        for relation in delta.relations:
            self._merge_relation(relation, local, stats)
        for reference in delta.anchors_add:
            node_id = self._resolve(reference, local)
            if node_id is not None and node_id not in self.anchors:
                self.anchors.append(node_id)
                self.anchor_log.append(node_id)
                stats.anchors_added += 1
        for reference in delta.anchors_retire:
            node_id = self._resolve(reference, local)
            if node_id is not None and node_id in self.anchors:
                self.anchors.remove(node_id)
                stats.anchors_retired += 1
        for direction in delta.invalid_directions:
            self._add_direction(direction, stats)
        return stats

    def add_anchor(self, node_id: str) -> bool:
        if node_id not in self.nodes or node_id in self.anchors:
            return False
        self.anchors.append(node_id)
        self.anchor_log.append(node_id)
        return True

    def retire_anchor(self, node_id: str) -> bool:
        if node_id not in self.anchors:
            return False
        self.anchors.remove(node_id)
        return True

    def mark_exhausted(self, text: str, reason: str = "searched without new evidence") -> bool:
        """Record a direction that a fruitless search exhausted (no evidence needed)."""
        if not text.strip() or self.is_exhausted(text):
            return False
        self.exhausted.append(Direction(text.strip(), reason, [], kind="exhausted"))
        return True

    # ------------------------------------------------------------------ internals
    def _new_id(self) -> str:
        node_id = f"n{self.next_id}"
        self.next_id += 1
        return node_id

    def _match(self, label: str, type_: str | None) -> str | None:
        key = label_key(label)
        if not key:
            return None
        for node in self.nodes.values():
            if (type_ is None or types_compatible(node.type, type_)) and (
                label_key(node.label) == key or key in {label_key(a) for a in node.aliases}
            ):
                return node.node_id
        if type_ is not None and type_ not in NAMED_TYPES and type_ != "concept":
            return None
        return self._first_name_match(key)

    def _first_name_match(self, key: str) -> str | None:
        """A one-word name and a multi-word name that starts with it are one entity when
        exactly one named node fits ("Jonas" ~ "Jonas Berg"); ambiguity means no match."""
        words = key.split()
        found: list[str] = []
        for node in self.nodes.values():
            if node.type not in NAMED_TYPES:
                continue
            node_words = label_key(node.label).split()
            one_is_first_name = (len(words) == 1) != (len(node_words) == 1)
            if one_is_first_name and node_words[0] == words[0]:
                found.append(node.node_id)
        return found[0] if len(found) == 1 else None

    def _merge_node(self, incoming: GraphNode, stats: MergeStats) -> str:
        node_type = incoming.type if incoming.type in NODE_TYPES else "concept"
        existing_id = self._match(incoming.label, node_type)
        if existing_id is None:
            node = GraphNode(
                node_id=self._new_id(),
                label=" ".join(incoming.label.split()),
                type=node_type,
                provenance=set(incoming.provenance),
                aliases={a for a in incoming.aliases if label_key(a) != label_key(incoming.label)},
                from_question=incoming.from_question,
            )
            self.nodes[node.node_id] = node
            stats.nodes_added += 1
            for name, versions in incoming.attributes.items():
                stats.versions_added += _add_versions(node, name, versions)
            return node.node_id
        node = self.nodes[existing_id]
        stats.nodes_reused += 1
        node.type = _more_specific(node.type, node_type)
        _absorb_label(node, incoming.label)
        for alias in incoming.aliases:
            _absorb_label(node, alias)
        new_turns = incoming.provenance - node.provenance
        stats.provenance_added += len(new_turns)
        node.provenance |= incoming.provenance
        node.from_question = node.from_question or incoming.from_question
        for name, versions in incoming.attributes.items():
            stats.versions_added += _add_versions(node, name, versions)
        return existing_id

    def _resolve(self, reference: str, local: dict[str, str]) -> str | None:
        if reference in local:
            return local[reference]
        if reference in self.nodes:
            return reference
        key = label_key(reference)
        if key in local:
            return local[key]
        return self._match(reference, None)

    def _merge_relation(self, relation: Relation, local: dict[str, str], stats: MergeStats) -> None:
        label = " ".join(relation.label.strip().lower().split())
        if not label:
            return
        ends = []
        for reference in (relation.source_id, relation.target_id):
            node_id = self._resolve(reference, local)
            if node_id is None:
                if not label_key(reference):
                    return
                node_id = self._merge_node(
                    GraphNode("", reference, "concept", provenance=set(relation.provenance)),
                    stats,
                )
                local[label_key(reference)] = node_id
            ends.append(node_id)
        source, target = ends
        if source == target:
            return  # "Maya -co-occurs-> Maya" after alias merging says nothing
        if label in SYMMETRIC_RELATIONS:
            source, target = sorted((source, target), key=_id_order)
        for existing in self.relations:
            if (existing.source_id, existing.label, existing.target_id) == (source, label, target):
                new_turns = relation.provenance - existing.provenance
                stats.provenance_added += len(new_turns)
                existing.provenance |= relation.provenance
                return
        self.relations.append(Relation(source, label, target, set(relation.provenance)))
        stats.relations_added += 1

    def _add_direction(self, direction: Direction, stats: MergeStats) -> None:
        kind = direction.kind if direction.kind in DIRECTION_KINDS else "invalid"
        if kind == "invalid" and not direction.turn_ids:
            # A direction is invalid only when evidence contradicts it; a claim without the
            # contradicting turns is not evidence.
            stats.directions_rejected += 1
            return
        if not direction.text.strip() or self.is_exhausted(direction.text):
            return
        self.exhausted.append(
            Direction(direction.text.strip(), direction.reason, list(direction.turn_ids), kind)
        )
        stats.directions_added += 1

    # ------------------------------------------------------------------ rendering
    def to_text(self, max_chars: int = 2000) -> str:
        """A compact listing for a (small) language model, at most ``max_chars`` characters.

        Most useful first: anchors, exhausted directions, anchor nodes, evidence nodes (most
        recent first), seed nodes, relations. What does not fit is counted in a last line.
        """
        if max_chars < 40:
            raise ValueError(f"to_text needs max_chars >= 40, got {max_chars}")
        lines: list[str] = []
        anchors = ", ".join(self._short(node_id) for node_id in self.anchors) or "(none)"
        lines.append(f"Anchors: {anchors}")
        for direction in self.exhausted:
            because = f" [{', '.join(direction.turn_ids)}]" if direction.turn_ids else ""
            lines.append(f"Do not pursue ({direction.kind}): {direction.text}{because}")
        body: list[tuple[str, str]] = []
        if self.nodes:
            body.append(("", "Nodes:"))
            body += [("node", self._node_line(n)) for n in self._nodes_by_priority()]
        if self.relations:
            body.append(("", "Relations:"))
            body += [("relation", line) for line in self._relation_lines()]
        return _fit_lines(lines, body, max_chars)

    def _short(self, node_id: str) -> str:
        node = self.nodes[node_id]
        return f"{node.label} ({node.type})"

    def _nodes_by_priority(self) -> list[GraphNode]:
        anchored = [self.nodes[a] for a in self.anchors]
        evidence = [
            n
            for n in reversed(self.nodes.values())
            if n.node_id not in self.anchors and n.provenance
        ]
        rest = [
            n for n in self.nodes.values() if n.node_id not in self.anchors and not n.provenance
        ]
        return anchored + evidence + rest

    @staticmethod
    def _node_line(node: GraphNode) -> str:
        parts = [f"- {node.label} [{node.type}]"]
        for name, versions in node.attributes.items():
            values = " -> ".join(
                f"{v.value} ({v.time[:10]})" if v.time else v.value for v in versions
            )
            parts.append(f"{name}: {values}")
        if node.provenance:
            parts.append("from " + ",".join(sorted(node.provenance, key=_turn_order)[:4]))
        return "; ".join(parts)

    def _relation_lines(self) -> list[str]:
        """One line per source and label, most recent relations first:
        "- Maya -mentions-> Jonas, gym, 2023-05-06"."""
        grouped: dict[tuple[str, str], list[str]] = {}
        for relation in reversed(self.relations):
            key = (relation.source_id, relation.label)
            grouped.setdefault(key, []).append(self.nodes[relation.target_id].label)
        return [
            f"- {self.nodes[source].label} -{label}-> {', '.join(targets)}"
            for (source, label), targets in grouped.items()
        ]

    # ------------------------------------------------------------------ serialisation
    def to_dict(self) -> dict[str, Any]:
        """A JSON-serialisable dict; ``from_dict`` rebuilds an equal graph."""
        return {
            "format": GRAPH_FORMAT_VERSION,
            "next_id": self.next_id,
            "nodes": [_node_to_dict(n) for n in self.nodes.values()],
            "relations": [
                {
                    "source": r.source_id,
                    "label": r.label,
                    "target": r.target_id,
                    "provenance": sorted(r.provenance),
                }
                for r in self.relations
            ],
            "anchors": list(self.anchors),
            "anchor_log": list(self.anchor_log),
            "exhausted": [
                {"text": d.text, "reason": d.reason, "turn_ids": list(d.turn_ids), "kind": d.kind}
                for d in self.exhausted
            ],
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> EvidenceGraph:
        if not data:
            return cls()
        version = data.get("format", GRAPH_FORMAT_VERSION)
        if version != GRAPH_FORMAT_VERSION:
            raise ValueError(f"unknown evidence graph format {version!r}")
        nodes = [_node_from_dict(n) for n in data.get("nodes", [])]
        return cls(
            nodes={n.node_id: n for n in nodes},
            relations=[
                Relation(r["source"], r["label"], r["target"], set(r.get("provenance", [])))
                for r in data.get("relations", [])
            ],
            anchors=list(data.get("anchors", [])),
            exhausted=[
                Direction(d["text"], d.get("reason", ""), list(d.get("turn_ids", [])), d["kind"])
                for d in data.get("exhausted", [])
            ],
            anchor_log=list(data.get("anchor_log", [])),
            next_id=int(data.get("next_id", len(nodes) + 1)),
        )


def _absorb_label(node: GraphNode, label: str) -> None:
    """Keep the fullest form as the label ("Jonas Berg" over "Jonas"); others become aliases."""
    label = " ".join(label.split())
    if not label or label_key(label) == label_key(node.label):
        return
    if len(label_key(label).split()) > len(label_key(node.label).split()):
        node.aliases.add(node.label)
        node.label = label
    else:
        node.aliases.add(label)
    node.aliases = {a for a in node.aliases if label_key(a) != label_key(node.label)}


def _add_versions(node: GraphNode, name: str, versions: Iterable[AttributeVersion]) -> int:
    """Add values not yet recorded; conflicting values stay side by side as versions, in turn
    time order (untimed versions after timed ones, in arrival order)."""
    name = " ".join(name.strip().lower().split())
    if not name:
        return 0
    current = node.attributes.setdefault(name, [])
    added = 0
    for version in versions:
        value = " ".join(str(version.value).split())
        if not value:
            continue
        if any(label_key(v.value) == label_key(value) for v in current):
            continue  # the same value said again is not a new version
        current.append(AttributeVersion(value, version.turn_id, version.time))
        added += 1
    current.sort(key=lambda v: (v.time is None, v.time or ""))
    if not current:
        del node.attributes[name]
    return added


def _node_to_dict(node: GraphNode) -> dict[str, Any]:
    return {
        "id": node.node_id,
        "label": node.label,
        "type": node.type,
        "attributes": {
            name: [{"value": v.value, "turn_id": v.turn_id, "time": v.time} for v in versions]
            for name, versions in node.attributes.items()
        },
        "provenance": sorted(node.provenance),
        "aliases": sorted(node.aliases),
        "from_question": node.from_question,
    }


def _node_from_dict(data: dict[str, Any]) -> GraphNode:
    return GraphNode(
        node_id=data["id"],
        label=data["label"],
        type=data["type"],
        attributes={
            name: [AttributeVersion(v["value"], v["turn_id"], v.get("time")) for v in versions]
            for name, versions in data.get("attributes", {}).items()
        },
        provenance=set(data.get("provenance", [])),
        aliases=set(data.get("aliases", [])),
        from_question=bool(data.get("from_question", False)),
    )


def _id_order(node_id: str) -> tuple[int, str]:
    digits = node_id[1:]
    return (int(digits), node_id) if digits.isdigit() else (10**9, node_id)


def _turn_order(turn_id: str) -> tuple[Any, ...]:
    """ "D2:10" after "D2:9": numbers compare as numbers."""
    return tuple(int(p) if p.isdigit() else p for p in re.split(r"(\d+)", turn_id))


def _fit_lines(head: list[str], body: list[tuple[str, str]], max_chars: int) -> str:
    """Head lines, then body lines while they fit; a final line counts what was left out."""
    lines: list[str] = []
    used = 0
    for raw in head:
        line = _clip(raw, max_chars)
        if used + len(line) + 1 > max_chars:
            break
        lines.append(line)
        used += len(line) + 1
    left_out: dict[str, int] = {}
    for position, (kind, raw) in enumerate(body):
        line = _clip(raw, 240)
        # Keep room for the omission note only while something may still be left out.
        remaining = len(body) - position - 1
        reserve = 48 if remaining else 0
        if not left_out and used + len(line) + 1 + reserve <= max_chars:
            lines.append(line)
            used += len(line) + 1
        else:
            left_out[kind] = left_out.get(kind, 0) + 1
    left_out.pop("", None)  # section headers
    if left_out:
        note = "(not shown: " + ", ".join(f"{n} {k}s" for k, n in left_out.items()) + ")"
        if used + len(note) <= max_chars:
            lines.append(note)
    return "\n".join(lines)[:max_chars]


def _clip(line: str, limit: int) -> str:
    return line if len(line) <= limit else line[: limit - 3] + "..."


# ---- typing rules shared by the heuristic seeder and verifier -----------------------------------


def _word_set(words: str) -> frozenset[str]:
    return frozenset(words.split())


_ORGANISATION_WORDS = _word_set(
    """inc ltd llc corp corporation company co university college school academy institute
    hospital clinic bank church club team association foundation society council center
    centre museum library agency department ministry group studio studios records press
    network labs lab shelter charity organization organisation union committee gallery
    cafe restaurant store shop bakery"""
)
_LOCATION_WORDS = _word_set(
    """city town village county state country island islands lake river mountain mountains
    mount mt park beach valley street st avenue road bay coast canyon forest desert
    national"""
)
_LOCATION_PREPOSITIONS = frozenset({"in", "to", "from", "at", "near", "visited", "visit", "toward"})
_KNOWN_PLACES = _word_set(
    """paris london berlin tokyo rome madrid lisbon amsterdam vienna prague dublin
    barcelona athens boston chicago seattle denver austin miami california texas florida
    oregon canada mexico france spain italy germany japan china india brazil england
    ireland scotland sweden norway denmark finland australia europe asia africa america
    usa uk nyc york hawaii alaska"""
)


def guess_name_type(name: str, context: str = "", known_people: Iterable[str] = ()) -> str:
    """person / organisation / location / concept for a proper name seen in ``context``.

    Rules, first that applies: a known participant is a person; an organisation word in the
    name ("Berlin Zoo Club"); a place word or a well-known place; a name right after a place
    preposition ("lives in Lisbon"); a titled work in quotes is a concept; one or two
    capitalised words are a person; longer runs are a concept (titles, slogans).
    """
    words = [w.lower().strip(".,") for w in name.split()]
    if not words:
        return "concept"
    people = {label_key(p) for p in known_people if p}
    if label_key(name) in people or words[0] in people:
        return "person"
    if label_key(name) in _KNOWN_PLACES:
        return "location"
    if len(words) == 1 and len(name) > 1 and name.isupper():
        return "concept"  # an acronym: a group, a topic, a programme; rarely a person
    if any(w in _ORGANISATION_WORDS for w in words):
        return "organisation"
    if any(w in _LOCATION_WORDS for w in words) or label_key(name) in _KNOWN_PLACES:
        return "location"
    if context:
        text = normalise_apostrophes(context)
        position = text.find(name)
        if position > 0:
            before = text[:position].split()
            if before and before[-1].lower() in _LOCATION_PREPOSITIONS:
                return "location"
            if text[position - 1] in "\"'“":
                return "concept"
    return "person" if len(words) <= 2 and all(w.isalpha() for w in words) else "concept"


# Dates as temporal normalisation writes them ("(2023-05-06)", "(the week of 2023-04-24)",
# "(April 2023)", "(shortly before 2023-05-08)", "(2022)") and explicit dates in text.
_MONTHS = "January|February|March|April|May|June|July|August|September|October|November|December"
_RESOLVED_DATE_RE = re.compile(
    r"\((?P<date>(?:around |shortly before |some time before |long before )?"
    r"(?:the week of |the weekend of )?"
    r"(?:\d{4}-\d{2}-\d{2}|(?:" + _MONTHS + r") \d{4}|(?:spring|summer|fall|autumn|winter) \d{4}"
    r"|\d{4}))\)"
)
_EXPLICIT_DATE_RE = re.compile(
    r"\b(?:(?P<d1>\d{1,2})(?:st|nd|rd|th)? (?P<m1>" + _MONTHS + r"),? (?P<y1>\d{4})"
    r"|(?P<m2>" + _MONTHS + r") (?P<d2>\d{1,2})(?:st|nd|rd|th)?,? (?P<y2>\d{4})"
    r"|(?P<m3>" + _MONTHS + r"),? (?P<y3>\d{4})"
    r"|(?P<iso>\d{4}-\d{2}-\d{2})"
    r"|(?<![\d$.,-])(?P<year>(?:19|20)\d{2})(?![\d%.,-]\d))\b"
)
_MONTH_NUMBER = {m.lower(): i for i, m in enumerate(_MONTHS.split("|"), start=1)}


@dataclass(frozen=True)
class DateMention:
    label: str  # normalised: "2023-05-06", "the week of 2023-04-24", "May 2023"
    start: int  # span in the text, for masking numbers that belong to dates
    end: int


def date_mentions(text: str) -> list[DateMention]:
    """Resolved dates (from temporal normalisation) and explicit dates, in text order.

    A resolved date is preferred over the words it resolves: in "last Saturday (2023-05-06)"
    the date is 2023-05-06. Explicit day dates become ISO ("May 25, 2022" -> "2022-05-25").
    """
    found: list[DateMention] = []
    taken: list[tuple[int, int]] = []
    for match in _RESOLVED_DATE_RE.finditer(text):
        found.append(DateMention(match["date"], match.start(), match.end()))
        taken.append(match.span())
    for match in _EXPLICIT_DATE_RE.finditer(text):
        if any(s <= match.start() < e for s, e in taken):
            continue
        found.append(DateMention(_explicit_label(match), match.start(), match.end()))
    found.sort(key=lambda m: m.start)
    return found


def _explicit_label(match: re.Match[str]) -> str:
    if match["iso"] or match["year"]:
        return match["iso"] or match["year"]
    if match["y3"]:
        return f"{match['m3']} {match['y3']}"
    day = match["d1"] or match["d2"]
    month = _MONTH_NUMBER[(match["m1"] or match["m2"]).lower()]
    year = match["y1"] or match["y2"]
    return f"{int(year):04d}-{month:02d}-{int(day):02d}"


_NUMBER_WORDS = (
    "two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|fifteen|twenty|thirty|forty"
    "|fifty|hundred|thousand|dozen"
)
_QUANTITY_RE = re.compile(
    r"(?P<q>(?:\$\s?)?\b(?:\d+(?:[.,]\d+)*|(?:" + _NUMBER_WORDS + r"))\b%?"
    r"(?:\s+(?!(?:and|or|of|the|a|an|to|in|on|at|for|with|is|was)\b)[a-z][a-z-]{2,})?)",
    re.IGNORECASE,
)


def quantity_mentions(text: str, exclude: Sequence[tuple[int, int]] = ()) -> list[str]:
    """Numbers with the word they count ("3 turtles", "$500", "twenty years"), outside the
    given spans (dates)."""
    out: list[str] = []
    for match in _QUANTITY_RE.finditer(text):
        if any(s <= match.start() < e for s, e in exclude):
            continue
        value = " ".join(match["q"].split())
        if value.lower() not in {v.lower() for v in out}:
            out.append(value)
    return out


__all__ = [
    "NAMED_TYPES",
    "NODE_TYPES",
    "AttributeVersion",
    "DateMention",
    "Direction",
    "EvidenceGraph",
    "GraphDelta",
    "GraphNode",
    "MergeStats",
    "Relation",
    "date_mentions",
    "guess_name_type",
    "label_key",
    "quantity_mentions",
    "types_compatible",
]
