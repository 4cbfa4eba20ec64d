"""`--env locomo_split` changes only the keys it names: the rest of training comes from base."""

from __future__ import annotations

from pathlib import Path

from kedro.config import OmegaConfigLoader

from mera_pipelines.core.training.synthesis import SynthesisSettings
from mera_pipelines.core.training.trainers import GRPOSettings, SFTSettings
from mera_pipelines.settings import CONFIG_LOADER_ARGS

CONF = Path(__file__).resolve().parents[1] / "conf"


def training_params(env: str) -> dict:
    args = {**CONFIG_LOADER_ARGS, "default_run_env": env}
    return OmegaConfigLoader(str(CONF), **args)["parameters"]["training"]


def test_locomo_split_overrides_the_budget_and_keeps_the_rest_of_base():
    base, split = training_params("local"), training_params("locomo_split")
    assert split["train_memories"] == ["conv-26", "conv-30", "conv-41"]
    synthesis = SynthesisSettings.from_params(split["synthesis"])
    assert synthesis.question_style == "topic" and synthesis.max_per_memory == 150
    assert SynthesisSettings.from_params(base["synthesis"]).question_style == "cloze"
    assert synthesis.question_window is None  # base's, kept
    assert split["collect"]["min_rounds"] == 3 and base["collect"]["min_rounds"] is None
    assert split["collect"]["concurrency"] == base["collect"]["concurrency"]
    grpo = GRPOSettings.from_params(split["grpo"])
    assert (grpo.steps, grpo.prompts_per_step, grpo.learning_rate) == (40, 2, 1e-5)
    # keys the env does not name keep base's values (a soft merge, not a replacement)
    assert grpo.num_generations == base["grpo"]["num_generations"]
    assert split["sft"] == base["sft"] and split["reward"] == base["reward"]
    assert SFTSettings.from_params(split["sft"]).max_steps == base["sft"]["max_steps"]
    assert split["filtering"]["max_states"] == 64
    assert split["filtering"]["group_size"] == base["filtering"]["group_size"]
