"""evaluation.use_trained_planner: the trained planner's backend and prompt settings."""

from __future__ import annotations

import pytest

from mera_pipelines.core.errors import ConfigError
from mera_pipelines.core.evaluation import use_trained_planner
from mera_pipelines.core.training.model_store import PlannerModel


def model_folder(tmp_path):
    # The backend checks the folder exists and loads the weights lazily, on the first call.
    (tmp_path / "config.json").write_text("{}")
    return tmp_path


def test_switches_the_planner_to_the_model_with_its_training_prompt(tmp_path):
    model = PlannerModel(model_folder(tmp_path), {"prompt": {"graph_chars": 321, "max_tokens": 64}})
    kinds = {"planner": "heuristic", "verifier": "heuristic"}
    role_params: dict = {}

    backend = use_trained_planner(
        model, {"torch_threads": 1, "max_new_tokens": 80}, kinds, role_params
    )

    assert kinds == {"planner": "llm", "verifier": "heuristic"}
    assert role_params == {"planner": {"graph_chars": 321, "max_tokens": 64}}
    assert backend.path == tmp_path
    assert backend.torch_threads == 1


def test_explicit_role_params_win_over_the_metadata(tmp_path):
    model = PlannerModel(model_folder(tmp_path), {"prompt": {"graph_chars": 321}})
    role_params = {"planner": {"graph_chars": 900}}

    use_trained_planner(model, {"cache_dir": str(tmp_path / "cache")}, {}, role_params)

    assert role_params == {"planner": {"graph_chars": 900}}


def test_a_planner_trained_with_the_draft_prompt_is_evaluated_with_it(tmp_path):
    model = PlannerModel(model_folder(tmp_path), {"prompt": {"graph_chars": 321, "draft": True}})
    role_params: dict = {}

    use_trained_planner(model, {}, {}, role_params)

    assert role_params == {"planner": {"graph_chars": 321, "draft": True}}


def test_a_planner_trained_to_complement_the_heuristic_is_evaluated_so(tmp_path):
    model = PlannerModel(
        model_folder(tmp_path), {"prompt": {"graph_chars": 321, "complement": True}}
    )
    role_params: dict = {}

    use_trained_planner(model, {}, {}, role_params)

    assert role_params == {"planner": {"graph_chars": 321, "complement": True}}


def test_a_planner_trained_with_hints_is_evaluated_with_them(tmp_path):
    model = PlannerModel(
        model_folder(tmp_path), {"prompt": {"graph_chars": 321, "hints": True, "draft": False}}
    )
    role_params: dict = {}

    use_trained_planner(model, {}, {}, role_params)

    assert role_params == {"planner": {"graph_chars": 321, "hints": True}}


def test_a_bad_backend_setting_is_named_in_the_error(tmp_path):
    model = PlannerModel(model_folder(tmp_path), {"prompt": {}})

    with pytest.raises(ConfigError, match=r"^evaluation\.planner_model_backend: Unknown key\(s\) "):
        use_trained_planner(model, {"torch_thread": 1}, {}, {})
