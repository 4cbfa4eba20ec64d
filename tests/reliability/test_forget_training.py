"""Forgetting also covers what training derived from a memory: the train pipeline's tables
(synthetic questions, planner states, training states, rollouts) that exist get a version
without the memory's (or the turn's) rows, and planners trained on the memory are reported, or
deleted with ``forget.planners=delete``."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
import yaml
from kedro.io import DatasetError, Version

from mera_pipelines.core.errors import ConfigError
from mera_pipelines.core.training.model_store import METADATA_FILE, PlannerModelStore
from mera_pipelines.datasets import VersionedTablesDataset
from mera_pipelines.pipelines.forget.nodes import (
    ForgetTarget,
    check_forget_target,
    forget_planners,
    forget_report,
    forget_training_rows,
)
from tests.support.llm_project import latest_table, write_subset
from tests.support.project import REPO_ROOT, kedro_cli, make_project_copy

PATHS = {
    "synthetic_questions": "data/05_model_input/synthetic_questions.parquet",
    "planner_states": "data/05_model_input/planner_states.parquet",
    "training_states": "data/05_model_input/training_states.parquet",
    "rollouts": "data/07_model_output/rollouts.parquet",
}


def training_tables(memory: str = "m", other: str = "o") -> dict[str, pd.DataFrame]:
    """Two questions of ``memory`` (one from turns t1+t2, one from t3), one of ``other`` from
    its own turn t1; states before each planner call; two rollouts per state, plus rollouts of
    states no state table holds any more."""
    questions = pd.DataFrame(
        {
            "question_id": [f"syn-{memory}-0000", f"syn-{memory}-0001", f"syn-{other}-0000"],
            "memory_id": [memory, memory, other],
            "question": ["q about t1 and t2", "q about t3", "q of the other memory"],
            "gold_turn_ids": [["t1", "t2"], ["t3"], ["t1"]],
        }
    )
    state_questions = [*questions["question_id"][:2], *questions["question_id"][1:]]
    states = pd.DataFrame(
        {
            "state_id": [f"{q}#{r}" for q, r in zip(state_questions, [0, 0, 1, 0], strict=True)],
            "memory_id": [memory, memory, memory, other],
            "question_id": state_questions,
            "graph_text": ["", "", "saw t1", ""],
            "gold_turn_ids": [["t1", "t2"], ["t3"], ["t3"], ["t1"]],
            "viewed_turn_ids": [[], [], ["t1", "t4"], []],
            "found_turn_ids": [[], [], [], []],
        }
    )
    rollout_states = [*states["state_id"], f"syn-{memory}-0009#0", f"syn-{other}-0009#0"]
    rollouts = pd.DataFrame(
        {
            "state_id": [state for state in rollout_states for _ in range(2)],
            "sample": [0, 1] * len(rollout_states),
            "completion": ["{}"] * 2 * len(rollout_states),
        }
    )
    return {
        "synthetic_questions": questions,
        "planner_states": states,
        "training_states": states.iloc[1:].reset_index(drop=True),
        "rollouts": rollouts,
    }


# ---- the filtering node -----------------------------------------------------------------------


def test_forgetting_a_memory_drops_all_its_training_rows():
    tables = training_tables(memory="demo-1", other="demo-10")  # ids that share a prefix
    kept, counts = forget_training_rows(tables, ForgetTarget("demo-1"))
    assert counts == {
        "synthetic_questions_removed": 2,
        "planner_states_removed": 3,
        "training_states_removed": 2,
        "rollouts_removed": 8,  # 3 states x 2, and the 2 of a state only its id names
    }
    for name in ("synthetic_questions", "planner_states", "training_states"):
        assert set(kept[name]["memory_id"]) == {"demo-10"}
    assert set(kept["rollouts"]["state_id"]) == {"syn-demo-10-0000#0", "syn-demo-10-0009#0"}
    assert list(kept["rollouts"].index) == [0, 1, 2, 3]


def test_forgetting_a_turn_drops_the_rows_that_hold_it():
    kept, counts = forget_training_rows(training_tables(), ForgetTarget("m", "t1"))
    # the question written from t1 (gold) goes; the one from t3 stays
    assert list(kept["synthetic_questions"]["question_id"]) == ["syn-m-0001", "syn-o-0000"]
    # its state goes, and the state whose verifier saw t1; the other memory's t1 is not it
    assert list(kept["planner_states"]["state_id"]) == ["syn-m-0001#0", "syn-o-0000#0"]
    assert list(kept["training_states"]["state_id"]) == ["syn-m-0001#0", "syn-o-0000#0"]
    # rollouts go with their states; one whose state is in no table cannot be checked: it goes
    assert set(kept["rollouts"]["state_id"]) == {"syn-m-0001#0", "syn-o-0000#0", "syn-o-0009#0"}
    assert counts == {
        "synthetic_questions_removed": 1,
        "planner_states_removed": 2,
        "training_states_removed": 1,
        "rollouts_removed": 6,
    }


def test_a_turn_no_training_row_holds_changes_no_table():
    tables = training_tables()
    rollouts = tables["rollouts"]
    tables["rollouts"] = rollouts[~rollouts["state_id"].str.endswith("0009#0")]  # all checkable
    kept, counts = forget_training_rows(tables, ForgetTarget("m", "t9"))
    assert kept == {}  # no new version of anything
    assert set(counts.values()) == {0} and len(counts) == 4


def test_absent_tables_are_left_out_and_have_no_count():
    assert forget_training_rows({}, ForgetTarget("m")) == ({}, {})
    tables = training_tables()
    only = {"rollouts": tables["rollouts"]}  # states gone: attributed by question id
    kept, counts = forget_training_rows(only, ForgetTarget("m"))
    assert counts == {"rollouts_removed": 8}
    assert set(kept["rollouts"]["state_id"]) == {"syn-o-0000#0", "syn-o-0009#0"}


def test_a_table_forget_cannot_attribute_is_a_config_error():
    with pytest.raises(ConfigError, match="Training table 'mystery'"):
        forget_training_rows({"mystery": pd.DataFrame({"x": [1]})}, ForgetTarget("m"))


def test_check_refuses_a_target_nothing_holds():
    turns = pd.DataFrame({"memory_id": ["m"], "turn_id": ["t1"]})
    stores = (PlannerModelStore("/nonexistent/a"), PlannerModelStore("/nonexistent/b"))
    check = check_forget_target
    assert check(turns, {}, *stores, {"memory_id": "m", "turn_id": "t1"}) == ForgetTarget("m", "t1")
    with pytest.raises(ConfigError, match="no turn, training table or planner"):
        check(turns, {}, *stores, {"memory_id": "x"})
    with pytest.raises(ConfigError, match="memory 'm' has no turn 't2'"):
        check(turns, {}, *stores, {"memory_id": "m", "turn_id": "t2"})
    # already gone from turns (a rerun): a training table still holding it is enough
    gone = turns.iloc[0:0]
    target = check(gone, training_tables(), *stores, {"memory_id": "m", "turn_id": "t3"})
    assert target == ForgetTarget("m", "t3")
    # rollouts of states no table holds go with any turn of their memory: no proof of a turn
    orphans = {"rollouts": training_tables()["rollouts"]}
    assert forget_training_rows(orphans, ForgetTarget("m", "t9"))[1] == {"rollouts_removed": 8}
    with pytest.raises(ConfigError, match="memory 'm' has no turn 't9'"):
        check(gone, orphans, *stores, {"memory_id": "m", "turn_id": "t9"})
    assert check(gone, orphans, *stores, {"memory_id": "m"}) == ForgetTarget("m")
    with pytest.raises(ConfigError, match="forget.planners"):
        check(turns, {}, *stores, {"memory_id": "m", "planners": "keep"})
    with pytest.raises(ConfigError, match="forget.memory_id"):
        check(turns, {}, *stores, {"memory_id": None})


# ---- planners -----------------------------------------------------------------------------------


def fake_planner(root: Path, version: str, memories: list[str], stage: str = "grpo") -> Path:
    """A version folder as PlannerModelStore writes it: no real weights needed."""
    folder = root / version
    folder.mkdir(parents=True)
    (folder / "config.json").write_text("{}")
    (folder / "model.safetensors").write_bytes(b"not really weights")
    metadata = {"train_memory_ids": memories, "stage": stage, "version": version}
    (folder / METADATA_FILE).write_text(json.dumps(metadata))
    return folder


def test_planners_are_reported_then_deleted(tmp_path):
    sft, grpo = PlannerModelStore(tmp_path / "planner_sft"), PlannerModelStore(tmp_path / "planner")  # fmt: skip
    sft_m = fake_planner(sft.root, "2026-01-01T00.00.00.000Z", ["m", "o"], "sft")
    grpo_m = fake_planner(grpo.root, "2026-01-02T00.00.00.000Z", ["m", "o"])
    grpo_o = fake_planner(grpo.root, "2026-01-03T00.00.00.000Z", ["o"])
    report = forget_planners(sft, grpo, ForgetTarget("m", "t1"))
    assert report == {"planners_trained_on_memory": [str(sft_m), str(grpo_m)], "planners_deleted": []}  # fmt: skip
    assert sft_m.is_dir() and grpo_m.is_dir()
    turns = pd.DataFrame({"memory_id": [], "turn_id": []})
    with pytest.raises(ConfigError):  # planners alone do not make a report-only target
        check_forget_target(turns, {}, sft, grpo, {"memory_id": "m"})
    # ...but they do when they are to be deleted (a rerun after a report-only forget)
    params = {"memory_id": "m", "planners": "delete"}
    target = check_forget_target(turns, {}, sft, grpo, params)
    report = forget_planners(sft, grpo, target)
    assert report["planners_deleted"] == [str(sft_m), str(grpo_m)]
    assert not sft_m.exists() and not grpo_m.exists() and grpo_o.is_dir()
    assert grpo.versions() == [grpo_o.name]


def test_report_merges_the_counts_and_counts_lists_as_metrics():
    report, metrics = forget_report(
        ForgetTarget("m", None, "delete"),
        {"turns_removed": 3},
        {"rollouts_removed": 4},
        {"planners_trained_on_memory": ["a", "b"], "planners_deleted": ["a", "b"]},
    )
    assert report["planners"] == "delete" and report["planners_trained_on_memory"] == ["a", "b"]
    assert metrics["planners_deleted"] == {"value": 2.0, "step": 0}
    assert metrics["rollouts_removed"] == {"value": 4.0, "step": 0}


# ---- the dataset --------------------------------------------------------------------------------


def tables_dataset(root: Path, save_version: str | None = None) -> VersionedTablesDataset:
    paths = {name: str(root / path) for name, path in PATHS.items()}
    return VersionedTablesDataset(paths, version=Version(None, save_version))


def test_dataset_with_no_table_written_loads_empty(tmp_path):
    dataset = tables_dataset(tmp_path)
    assert dataset.load() == {}
    assert not dataset.exists()
    dataset.save({})  # nothing to forget: nothing written
    assert list(tmp_path.iterdir()) == []


def test_dataset_loads_the_latest_versions_and_saves_only_the_given_tables(tmp_path):
    tables = training_tables()
    tables_dataset(tmp_path, "2026-01-01T00.00.00.000Z").save(
        {"synthetic_questions": tables["synthetic_questions"], "rollouts": tables["rollouts"]}
    )
    tables_dataset(tmp_path, "2026-01-02T00.00.00.000Z").save({"rollouts": tables["rollouts"][:3]})
    loaded = tables_dataset(tmp_path).load()
    assert sorted(loaded) == ["rollouts", "synthetic_questions"]
    assert len(loaded["rollouts"]) == 3
    assert list(loaded["synthetic_questions"]["gold_turn_ids"][0]) == ["t1", "t2"]
    folders = sorted(p.name for p in (tmp_path / PATHS["rollouts"]).iterdir())
    assert folders == ["2026-01-01T00.00.00.000Z", "2026-01-02T00.00.00.000Z"]
    assert not (tmp_path / PATHS["planner_states"]).exists()
    with pytest.raises(DatasetError, match=r"Tables \['turns'\]"):
        tables_dataset(tmp_path).save({"turns": tables["rollouts"]})


def test_catalog_entries_name_the_train_pipeline_files():
    """Forget reads the files the train pipeline writes: the two catalogs must not drift."""
    conf = REPO_ROOT / "conf" / "base"
    catalog = yaml.safe_load((conf / "catalog.yml").read_text())
    forget = yaml.safe_load((conf / "catalog_forget.yml").read_text())
    for entry in ("training_tables", "forget_training_tables"):
        assert forget[entry]["tables"] == {
            name: catalog[name]["filepath"] for name in forget[entry]["tables"]
        }
    written = {
        name
        for name, entry in catalog.items()
        if entry.get("versioned") and str(entry.get("type", "")).endswith("ParquetDataset")
        and name not in ("conversations", "turns", "questions", "facts", "question_results")
    }  # fmt: skip
    assert written == set(forget["training_tables"]["tables"]) == set(PATHS)


# ---- a real `kedro run --pipeline=forget` -----------------------------------------------------


def write_version(project: Path, path: str, frame: pd.DataFrame, version: str) -> None:
    folder = project / path / version
    folder.mkdir(parents=True)
    frame.to_parquet(folder / Path(path).name)


def run_forget(project: Path, params: str):
    return kedro_cli(project, "run", "--pipeline=forget", f"--params={params}")


def read_report(project: Path) -> dict:
    return json.loads((project / "data/08_reporting/forget_report.json").read_text())


@pytest.fixture(scope="module")
def trained_project(tmp_path_factory):
    """Memory demo-1 built (heuristic extraction), training tables as a train run would leave
    them but without training_states (so one table is absent), and three planner versions."""
    project = make_project_copy(tmp_path_factory.mktemp("forget_training"))
    write_subset(project, sessions=2, questions=4)
    result = kedro_cli(
        project, "run", "--pipelines=ingest,memory",
        "--params=source.path=data/01_raw/subset.json,source.format=locomo",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    turn_ids = list(latest_table(project, "data/03_primary/turns.parquet")["turn_id"])
    tables = training_tables(memory="demo-1", other="demo-2")
    t1, t3 = turn_ids[0], turn_ids[2]
    for name in ("synthetic_questions", "planner_states"):
        frame = tables[name]
        for column in ("gold_turn_ids", "viewed_turn_ids"):
            if column in frame:
                frame[column] = frame[column].map(
                    lambda ids: [{"t1": t1, "t3": t3}.get(i, i) for i in ids]
                )
        write_version(project, PATHS[name], frame, "2026-01-01T00.00.00.000Z")
    write_version(project, PATHS["rollouts"], tables["rollouts"], "2026-01-01T00.00.00.000Z")
    planners = project / "data/06_models"
    fake_planner(planners / "planner_sft", "2026-01-01T00.00.00.000Z", ["demo-1", "demo-2"], "sft")
    fake_planner(planners / "planner", "2026-01-02T00.00.00.000Z", ["demo-1", "demo-2"])
    fake_planner(planners / "planner", "2026-01-03T00.00.00.000Z", ["demo-2"])
    return project, t1


def test_kedro_run_forget_covers_training_tables_and_planners(trained_project):
    project, t1 = trained_project
    sft_folder = project / "data/06_models/planner_sft/2026-01-01T00.00.00.000Z"
    grpo_folder = project / "data/06_models/planner/2026-01-02T00.00.00.000Z"
    other_folder = project / "data/06_models/planner/2026-01-03T00.00.00.000Z"

    # one turn, planners reported (the default)
    result = run_forget(project, f"forget.memory_id=demo-1,forget.turn_id={t1}")
    assert result.returncode == 0, result.stderr[-3000:]
    report = read_report(project)
    assert report["turns_removed"] == 1
    assert report["synthetic_questions_removed"] == 1
    assert report["planner_states_removed"] == 2
    assert report["rollouts_removed"] == 6
    assert "training_states_removed" not in report  # never written
    assert not (project / PATHS["training_states"]).exists()
    assert report["planners"] == "report" and report["planners_deleted"] == []
    assert report["planners_trained_on_memory"] == [str(sft_folder), str(grpo_folder)]
    assert sft_folder.is_dir() and grpo_folder.is_dir()
    questions = latest_table(project, PATHS["synthetic_questions"])
    assert list(questions["question_id"]) == ["syn-demo-1-0001", "syn-demo-2-0000"]
    states = latest_table(project, PATHS["planner_states"])
    assert list(states["state_id"]) == ["syn-demo-1-0001#0", "syn-demo-2-0000#0"]
    assert len(list((project / PATHS["rollouts"]).iterdir())) == 2  # a new version

    # the whole memory, still reporting
    result = run_forget(project, "forget.memory_id=demo-1")
    assert result.returncode == 0, result.stderr[-3000:]
    report = read_report(project)
    assert report["synthetic_questions_removed"] == 1 and report["planner_states_removed"] == 1
    assert report["rollouts_removed"] == 2
    for name in ("synthetic_questions", "planner_states"):
        assert set(latest_table(project, PATHS[name])["memory_id"]) == {"demo-2"}
    assert set(latest_table(project, PATHS["rollouts"])["state_id"]) == {
        "syn-demo-2-0000#0", "syn-demo-2-0009#0"
    }  # fmt: skip
    assert sft_folder.is_dir() and grpo_folder.is_dir()

    # the memory is gone from every table; its planners still let a rerun delete them
    result = run_forget(project, "forget.memory_id=demo-1,forget.planners=delete")
    assert result.returncode == 0, result.stderr[-3000:]
    report = read_report(project)
    assert len(report["planners_deleted"]) == 2 and report["turns_removed"] == 0
    assert not sft_folder.exists() and not grpo_folder.exists() and other_folder.is_dir()
    assert [p.name for p in (project / "data/06_models/planner").iterdir()] == [other_folder.name]
    assert len(list((project / PATHS["rollouts"]).iterdir())) == 3  # nothing left to remove

    # now nothing holds demo-1: a typo or a done job, either way an error
    result = run_forget(project, "forget.memory_id=demo-1,forget.planners=delete")
    assert result.returncode != 0
    assert "no turn, training table or planner to delete has memory_id 'demo-1'" in result.stderr
