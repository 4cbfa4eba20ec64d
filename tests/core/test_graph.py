"""The evidence graph: merge rules, anchors, directions, text rendering, serialisation."""

import json

import pytest

from mera_pipelines.core.graph import (
    NODE_TYPES,
    AttributeVersion,
    Direction,
    EvidenceGraph,
    GraphDelta,
    GraphNode,
    Relation,
    date_mentions,
    guess_name_type,
    label_key,
    quantity_mentions,
    types_compatible,
)


def node(label, type_="person", *turns, local_id="", **attributes):
    return GraphNode(
        local_id,
        label,
        type_,
        attributes={
            name: [AttributeVersion(*version) for version in versions]
            for name, versions in attributes.items()
        },
        provenance=set(turns),
    )


def graph_with(*nodes, anchors=()):
    graph = EvidenceGraph()
    graph.merge(GraphDelta(nodes=list(nodes), anchors_add=list(anchors)))
    return graph


def labels(graph):
    return sorted(n.label for n in graph.nodes.values())


# ---- entity reuse ------------------------------------------------------------------------------


def test_node_types_are_the_papers_plus_concept():
    assert NODE_TYPES == (
        "person",
        "organisation",
        "location",
        "event",
        "date",
        "quantity",
        "state",
        "concept",
    )


@pytest.mark.parametrize(
    ("first", "second"),
    [
        ("Maya", "maya"),
        ("Maya", "Maya's"),
        ("Maya", "MAYA!"),
        ("the gym", "Gym"),
        ("James", "James'"),
    ],
)
def test_case_possessive_and_article_variants_are_one_node(first, second):
    graph = graph_with(node(first, "person", "D1:1"))
    stats = graph.merge(GraphDelta(nodes=[node(second, "person", "D2:4")]))
    assert stats.nodes_added == 0 and stats.nodes_reused == 1
    assert graph.size() == (1, 0)
    assert next(iter(graph.nodes.values())).provenance == {"D1:1", "D2:4"}


def test_first_name_and_full_name_are_one_person_and_the_full_name_wins():
    graph = graph_with(node("Jonas", "person", "D1:1"))
    graph.merge(GraphDelta(nodes=[node("Jonas Berg", "person", "D3:2")]))
    (only,) = graph.nodes.values()
    assert only.label == "Jonas Berg"
    assert only.aliases == {"Jonas"}
    assert graph.find("jonas") is only
    assert graph.find("Jonas Berg") is only


def test_an_ambiguous_first_name_is_not_merged():
    graph = graph_with(node("Jonas Berg", "person"), node("Jonas Weber", "person"))
    graph.merge(GraphDelta(nodes=[node("Jonas", "person", "D4:1")]))
    assert labels(graph) == ["Jonas", "Jonas Berg", "Jonas Weber"]


def test_incompatible_types_are_not_merged_but_a_concept_takes_the_specific_type():
    graph = graph_with(node("2023", "date", "D1:1"))
    graph.merge(GraphDelta(nodes=[node("2023", "quantity", "D1:2")]))
    assert graph.size() == (2, 0)

    graph = graph_with(node("Lisbon", "concept"))
    graph.merge(GraphDelta(nodes=[node("Lisbon", "location", "D2:2")]))
    (only,) = graph.nodes.values()
    assert only.type == "location"


def test_named_types_are_compatible_with_each_other_not_with_dates():
    assert types_compatible("person", "location")
    assert types_compatible("event", "concept")
    assert types_compatible("concept", "person")
    assert not types_compatible("date", "quantity")
    assert not types_compatible("person", "date")
    assert not types_compatible("event", "person")


def test_unknown_node_types_become_concepts():
    graph = graph_with(node("vibes", "mood"))
    assert next(iter(graph.nodes.values())).type == "concept"


# ---- relations ---------------------------------------------------------------------------------


def test_relations_resolve_labels_and_delta_ids_and_are_deduplicated():
    graph = EvidenceGraph()
    first = GraphDelta(
        nodes=[node("Maya", "person", "D1:1", local_id="a"), node("gym", "location", "D1:1")],
        relations=[Relation("a", "met someone at", "gym", {"D1:1"})],
    )
    stats = graph.merge(first)
    assert stats.relations_added == 1
    again = GraphDelta(relations=[Relation("maya's", "Met  someone at", "Gym", {"D5:2"})])
    stats = graph.merge(again)
    assert stats.relations_added == 0 and stats.provenance_added == 1
    (relation,) = graph.relations
    assert relation.provenance == {"D1:1", "D5:2"}
    assert graph.nodes[relation.source_id].label == "Maya"


def test_symmetric_relations_are_stored_once():
    graph = graph_with(node("Maya"), node("Jonas"))
    graph.merge(GraphDelta(relations=[Relation("Maya", "co-occurs", "Jonas", {"D1:1"})]))
    graph.merge(GraphDelta(relations=[Relation("Jonas", "co-occurs", "Maya", {"D2:1"})]))
    assert len(graph.relations) == 1


def test_a_relation_to_an_unknown_label_creates_a_concept_node_with_provenance():
    graph = graph_with(node("Maya"))
    graph.merge(GraphDelta(relations=[Relation("Maya", "adopted", "a greyhound", {"D7:3"})]))
    created = graph.find("a greyhound")
    assert created is not None and created.type == "concept"
    assert created.provenance == {"D7:3"}
    assert len(graph.relations) == 1


def test_self_relations_after_alias_merging_are_dropped():
    graph = graph_with(node("Jonas Berg"))
    stats = graph.merge(GraphDelta(relations=[Relation("Jonas", "co-occurs", "Jonas Berg")]))
    assert stats.relations_added == 0 and not graph.relations


# ---- attribute versions ------------------------------------------------------------------------


def test_conflicting_attribute_values_are_kept_as_versions_in_turn_time_order():
    graph = graph_with(
        node("Jonas", "person", "D9:1", job=[("teacher", "D9:1", "2023-09-01T10:00")])
    )
    stats = graph.merge(
        GraphDelta(
            nodes=[
                node(
                    "Jonas",
                    "person",
                    "D2:1",
                    job=[("nurse", "D2:1", "2023-03-01T10:00"), ("Nurse", "D4:1", "2023-04-01")],
                )
            ]
        )
    )
    versions = graph.find("Jonas").attributes["job"]
    assert [(v.value, v.turn_id) for v in versions] == [("nurse", "D2:1"), ("teacher", "D9:1")]
    assert stats.versions_added == 1  # "Nurse" is the same value said again


def test_untimed_versions_follow_timed_ones():
    graph = graph_with(node("Maya", "person", job=[("chef", "D3:1", None)]))
    graph.merge(GraphDelta(nodes=[node("Maya", "person", job=[("baker", "D5:1", "2023-01-01")])]))
    assert [v.value for v in graph.find("Maya").attributes["job"]] == ["baker", "chef"]


# ---- anchors -----------------------------------------------------------------------------------


def test_anchors_are_added_by_label_or_id_and_reported_as_new_since_a_mark():
    graph = graph_with(node("Maya", "person", local_id="q"), anchors=["q"])
    assert graph.anchor_labels() == ["Maya"]
    mark = graph.mark()
    stats = graph.merge(
        GraphDelta(nodes=[node("Jonas", "person", "D2:3")], anchors_add=["jonas", "Maya", "nobody"])
    )
    assert stats.anchors_added == 1  # Maya is already one; "nobody" matches no node
    assert graph.anchor_labels() == ["Maya", "Jonas"]
    assert graph.new_anchors_since(mark) == ["Jonas"]
    assert graph.new_anchor_ids_since(mark) == [graph.find("Jonas").node_id]
    assert graph.new_anchors_since(graph.mark()) == []


def test_retired_anchors_are_no_longer_active_or_new():
    graph = graph_with(node("Maya"))
    mark = graph.mark()
    graph.merge(GraphDelta(nodes=[node("Jonas", "person", "D1:1")], anchors_add=["Jonas"]))
    stats = graph.merge(GraphDelta(anchors_retire=["Jonas"]))
    assert stats.anchors_retired == 1
    assert graph.anchors == [] and graph.new_anchors_since(mark) == []


# ---- directions --------------------------------------------------------------------------------


def test_a_direction_is_invalid_only_with_contradicting_evidence():
    graph = EvidenceGraph()
    stats = graph.merge(
        GraphDelta(invalid_directions=[Direction("trip to Lisbon", "seems unlikely", [])])
    )
    assert stats.directions_rejected == 1 and graph.exhausted == []
    stats = graph.merge(
        GraphDelta(
            invalid_directions=[Direction("trip to Lisbon", "Maya never went to Lisbon", ["D4:2"])]
        )
    )
    assert stats.directions_added == 1
    assert graph.exhausted == [
        Direction("trip to Lisbon", "Maya never went to Lisbon", ["D4:2"], "invalid")
    ]
    assert graph.is_exhausted("Trip to Lisbon")


def test_a_fruitless_search_marks_a_direction_exhausted_without_evidence():
    graph = EvidenceGraph()
    assert graph.mark_exhausted("Jonas gym")
    assert not graph.mark_exhausted("jonas  gym")  # already recorded
    assert graph.exhausted[0].kind == "exhausted" and graph.exhausted[0].turn_ids == []


def test_merge_stats_say_whether_anything_changed():
    graph = graph_with(node("Maya", "person", "D1:1"))
    assert not graph.merge(GraphDelta(nodes=[node("maya", "person", "D1:1")])).changed
    assert graph.merge(GraphDelta(nodes=[node("maya", "person", "D2:1")])).changed
    assert not graph.merge(GraphDelta()).changed


# ---- text and serialisation ---------------------------------------------------------------------


def rich_graph(n_people=3):
    graph = EvidenceGraph()
    nodes = [node("Maya", "person", "D1:1", local_id="maya")]
    nodes += [
        node(
            f"Friend{i}",
            "person",
            f"D{i}:2",
            job=[(f"job {i}", f"D{i}:2", f"2023-0{i % 9 + 1}-01")],
        )
        for i in range(n_people)
    ]
    nodes.append(node("2023-05-06", "date", "D1:1"))
    relations = [Relation("maya", "met", f"Friend{i}", {f"D{i}:2"}) for i in range(n_people)]
    graph.merge(
        GraphDelta(
            nodes=nodes,
            relations=relations,
            anchors_add=["Maya", "Friend0"],
            invalid_directions=[Direction("Lisbon", "Maya never went there", ["D3:3"])],
        )
    )
    return graph


def test_to_text_lists_anchors_directions_nodes_and_relations():
    text = rich_graph().to_text()
    lines = text.splitlines()
    assert lines[0] == "Anchors: Maya (person), Friend0 (person)"
    assert lines[1] == "Do not pursue (invalid): Lisbon [D3:3]"
    assert "- Friend1 [person]; job: job 1 (2023-02-01); from D1:2" in lines
    assert "- 2023-05-06 [date]; from D1:1" in lines
    assert "- Maya -met-> Friend2, Friend1, Friend0" in lines


@pytest.mark.parametrize("max_chars", [60, 200, 500, 2000])
def test_to_text_is_bounded_and_says_what_it_left_out(max_chars):
    graph = rich_graph(n_people=40)
    text = graph.to_text(max_chars)
    assert len(text) <= max_chars
    assert text.startswith("Anchors: Maya (person)")
    if max_chars >= 200:
        assert text.splitlines()[-1].startswith("(not shown: ")


def test_to_text_of_an_empty_graph():
    assert EvidenceGraph().to_text() == "Anchors: (none)"


def test_to_dict_round_trips_exactly_through_json():
    graph = rich_graph()
    graph.merge(
        GraphDelta(nodes=[node("Friend1 Smith", "person", "D8:1")], anchors_retire=["Maya"])
    )
    graph.mark_exhausted("gym")
    data = json.loads(json.dumps(graph.to_dict()))
    again = EvidenceGraph.from_dict(data)
    assert again == graph
    assert again.to_dict() == graph.to_dict()
    assert again.to_text() == graph.to_text()
    # the id counter survives: new nodes never reuse an id
    again.merge(GraphDelta(nodes=[node("Newcomer")]))
    assert len(set(again.nodes)) == len(again.nodes) == len(graph.nodes) + 1


def test_from_dict_of_nothing_is_an_empty_graph_and_unknown_formats_fail():
    assert EvidenceGraph.from_dict({}) == EvidenceGraph()
    with pytest.raises(ValueError, match="format"):
        EvidenceGraph.from_dict({"format": 99, "nodes": []})


# ---- shared typing rules -----------------------------------------------------------------------


def test_label_key():
    assert label_key("The Maya's!") == "maya"
    assert label_key("  Jonas   Berg ") == "jonas berg"


def test_date_mentions_prefer_resolved_dates_and_normalise_explicit_ones():
    text = (
        "Maya went hiking last Saturday (2023-05-06), met Jonas on May 25, 2022 and on "
        "25 May, 2022, moved in (April 2023), trained (the week of 2023-04-24), rested "
        "recently (shortly before 2023-05-08) and started in 2019."
    )
    assert [m.label for m in date_mentions(text)] == [
        "2023-05-06",
        "2022-05-25",
        "2022-05-25",
        "April 2023",
        "the week of 2023-04-24",
        "shortly before 2023-05-08",
        "2019",
    ]


def test_quantities_skip_numbers_inside_dates():
    text = "Maya has 3 turtles, paid $500 and ran for twenty years since (2019-05-01)."
    spans = [(m.start, m.end) for m in date_mentions(text)]
    assert quantity_mentions(text, exclude=spans) == ["3 turtles", "$500", "twenty years"]


@pytest.mark.parametrize(
    ("name", "context", "expected"),
    [
        ("Caroline", "", "person"),
        ("Lisbon", "Maya lives in Lisbon now", "location"),
        ("Paris", "", "location"),
        ("Riverside Yoga Club", "", "organisation"),
        ("Smoky Mountains", "", "location"),
        ("LGBTQ", "", "concept"),
        ("The Four Seasons", 'the song "The Four Seasons" by Vivaldi', "concept"),
        ("Mel", "Hi Mel", "person"),
    ],
)
def test_guess_name_type(name, context, expected):
    assert guess_name_type(name, context) == expected


def test_known_participants_are_people_even_after_a_place_preposition():
    assert guess_name_type("Jonas", "Maya went to Jonas", known_people=["Jonas"]) == "person"
