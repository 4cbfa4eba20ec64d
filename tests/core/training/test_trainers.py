"""SFT, GRPO and sampling with a tiny from-config model (real trl trainers, seconds on CPU)."""

from __future__ import annotations

import json
import tempfile
import warnings

import pytest
import torch
from transformers import AutoModelForCausalLM

from mera_pipelines.core.errors import ConfigError
from mera_pipelines.core.llm.tiny_lm import build_tiny_lm
from mera_pipelines.core.loop import LoopSettings
from mera_pipelines.core.memory import MemoryIndex
from mera_pipelines.core.training.model_store import read_model_folder
from mera_pipelines.core.training.reward import RewardSettings
from mera_pipelines.core.training.rollouts import RetrievalReward
from mera_pipelines.core.training.trainers import (
    GRPOSettings,
    PlannerSampler,
    SFTSettings,
    run_grpo,
    run_sft,
)
from tests.core.test_loop import TURNS
from tests.core.test_memory import fact_rows
from tests.support.embedding import HashingEmbedder

PROMPT = [{"role": "user", "content": "Question: what breed is the dog of Maya's friend?"}]
TEACHER = json.dumps({"intents": [{"desired_fact": "Maya friend dog breed"}]})


@pytest.fixture(autouse=True)
def trainer_output_in_tmp_path(tmp_path, monkeypatch):
    # run_sft / run_grpo write into a fresh temp folder that the planner-model dataset removes
    # after saving; these tests call the trainers directly, so keep their folders under tmp_path
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
    return build_tiny_lm(tmp_path_factory.mktemp("tiny") / "model")


@pytest.fixture(scope="module")
def memory(tmp_path_factory) -> MemoryIndex:
    index = MemoryIndex(str(tmp_path_factory.mktemp("db")), "facts", HashingEmbedder())
    index.upsert_facts(fact_rows("m", TURNS))
    return index


def two_turn_reward(memory: MemoryIndex) -> RetrievalReward:
    """The retrieval reward with a budget of two new turns per round."""
    return RetrievalReward(
        memory, LoopSettings(turns_first_round=2, turns_per_round=2), RewardSettings()
    )


def grpo_rows(count: int) -> list[dict]:
    """GRPO dataset rows: one round-2 state of memory "m" whose missing gold turn is D2:1."""
    row = {
        "prompt": PROMPT,
        "memory_id": "m",
        "gold_turn_ids": ["D2:1"],
        "viewed_turn_ids": ["D1:1"],
        "round_index": 2,
    }
    return [row] * count


def test_sft_trains_and_saves_a_loadable_folder(tiny_model):
    metrics = []
    folder, log = run_sft(
        tiny_model,
        [(PROMPT, TEACHER)] * 8,
        SFTSettings(max_steps=3, batch_size=4, learning_rate=1e-3),
        threads=1,
        log_metrics=lambda values, step: metrics.append((step, values)),
    )
    assert log.steps == 3 and len(log.step_seconds) == 3
    assert read_model_folder(folder).folder == folder
    losses = [h["loss"] for h in log.history if "loss" in h]
    assert len(losses) == 3
    assert any("sft.loss" in values for _, values in metrics)


def test_sft_needs_examples(tiny_model):
    with pytest.raises(ConfigError, match="no examples"):
        run_sft(tiny_model, [], SFTSettings())


# micro-batches of 1: each step's group of 2 is generated and scored at once, then applied
# as one update over two accumulated passes, so steps and scored completions are the same
@pytest.mark.parametrize("micro_batch_size", [None, 1])
def test_grpo_scores_completions_against_the_memory(tiny_model, memory, micro_batch_size):
    reward = two_turn_reward(memory)
    rows = grpo_rows(4)
    metrics = []
    folder, log = run_grpo(
        tiny_model,
        rows,
        reward,
        GRPOSettings(
            steps=2, num_generations=2, max_completion_length=8, micro_batch_size=micro_batch_size
        ),
        threads=1,
        log_metrics=lambda values, step: metrics.append(values),
    )
    assert log.steps == 2
    assert reward.completions == 4  # 2 steps x 1 prompt x 2 generations
    assert (folder / "config.json").is_file()
    assert any("grpo.reward" in values for values in metrics)
    assert any("grpo.rewards.retrieval_reward.mean" in values for values in metrics)


def test_on_policy_is_handed_the_model_being_trained(tiny_model):
    def text_reward(prompts, completions, **_):
        # rewards that differ within a group, so the update moves the weights
        return [sum(map(ord, str(c))) % 5 / 4 for c in completions]

    policies = []
    folder, _ = run_grpo(
        tiny_model,
        grpo_rows(4),
        text_reward,
        GRPOSettings(steps=2, num_generations=4, max_completion_length=8, learning_rate=1e-2),
        threads=1,
        on_policy=lambda model, tokenizer: policies.append(model),
    )
    [policy] = policies
    start = AutoModelForCausalLM.from_pretrained(tiny_model).state_dict()
    saved = AutoModelForCausalLM.from_pretrained(folder).state_dict()
    assert any(not torch.equal(start[name], saved[name]) for name in saved)
    # not a copy of the start: the object GRPO updated, holding the weights it saved
    assert all(torch.equal(saved[name], value) for name, value in policy.state_dict().items())


def test_sampler_returns_n_completions(tiny_model):
    sampler = PlannerSampler(tiny_model, max_new_tokens=5, threads=1)
    samples = sampler.sample(PROMPT, 3)
    assert len(samples) == 3 and all(isinstance(s, str) for s in samples)


def test_activation_recomputation_is_a_setting_off_by_default(tmp_path):
    # trl defaults it to on; on CPU it only costs a second forward pass per step
    # checked on the real trl configs, whose own default for the old name is True
    from trl import GRPOConfig, SFTConfig

    from mera_pipelines.core.training.trainers import _common_arguments, _grpo_arguments

    with warnings.catch_warnings():
        warnings.simplefilter("error", FutureWarning)  # no deprecated argument names either
        sft = SFTConfig(**_common_arguments(SFTSettings(), tmp_path))
        grpo = GRPOConfig(**_grpo_arguments(GRPOSettings(), tmp_path))
        on = GRPOConfig(**_grpo_arguments(GRPOSettings(gradient_checkpointing=True), tmp_path))
    assert sft.gradient_checkpointing is False and grpo.gradient_checkpointing is False
    assert on.gradient_checkpointing is True


def test_grpo_micro_batches_accumulate_one_generation_per_step(tmp_path):
    from trl import GRPOConfig

    from mera_pipelines.core.training.trainers import _grpo_arguments

    settings = GRPOSettings.from_params(
        {"num_generations": 16, "prompts_per_step": 1, "micro_batch_size": 4}
    )
    config = GRPOConfig(**_grpo_arguments(settings, tmp_path))
    assert config.per_device_train_batch_size == 4
    assert config.gradient_accumulation_steps == 4
    assert config.steps_per_generation == 4 and config.generation_batch_size == 16
    whole = GRPOConfig(**_grpo_arguments(GRPOSettings(num_generations=8), tmp_path))
    assert whole.per_device_train_batch_size == 8 and whole.gradient_accumulation_steps == 1


@pytest.mark.parametrize("micro_batch_size", [0, 3, 32])
def test_grpo_micro_batch_must_divide_the_step(micro_batch_size):
    with pytest.raises(ConfigError, match="micro_batch_size must divide .* = 16, got"):
        GRPOSettings.from_params(
            {"num_generations": 8, "prompts_per_step": 2, "micro_batch_size": micro_batch_size}
        )


def test_grpo_with_a_kl_coefficient_logs_the_kl(tiny_model, memory):
    # beta > 0 makes trl keep a frozen reference copy of the start model and log the KL to it
    reward = two_turn_reward(memory)
    rows = grpo_rows(2)
    metrics = []
    _, log = run_grpo(
        tiny_model,
        rows,
        reward,
        GRPOSettings(steps=1, num_generations=2, max_completion_length=8, beta=0.04),
        threads=1,
        log_metrics=lambda values, step: metrics.append(values),
    )
    assert log.steps == 1
    kl = [values["grpo.kl"] for values in metrics if "grpo.kl" in values]
    assert kl and all(value >= 0.0 for value in kl)
