"""The scale-out configuration files are valid for the tools that read them."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

CONF = Path(__file__).resolve().parents[1] / "conf"


@pytest.mark.parametrize("name", sorted(p.name for p in (CONF / "accelerate").glob("*.yaml")))
def test_accelerate_configs_load(name):
    from accelerate.commands.config.config_args import ClusterConfig

    config = ClusterConfig.from_yaml_file(str(CONF / "accelerate" / name))
    assert config.num_processes >= 1 and config.mixed_precision == "bf16"
    assert not config.use_cpu


def test_grpo_gpu_env_names_real_grpo_config_fields():
    from trl import GRPOConfig

    from mera_pipelines.core.training.trainers import GRPOSettings

    params = yaml.safe_load((CONF / "grpo_gpu" / "parameters_train.yml").read_text())
    grpo = params["training"]["grpo"]
    settings = GRPOSettings.from_params(grpo)  # every key is a training.grpo setting
    unknown = set(settings.trl_extra) - set(GRPOConfig.__dataclass_fields__)
    assert not unknown
    assert settings.use_vllm is True and settings.use_cpu is False
    assert settings.num_generations >= 2
    assert settings.gradient_checkpointing is True  # GPU memory; off on CPU by default


def test_trl_extra_cannot_shadow_a_grpo_setting():
    from mera_pipelines.core.errors import ConfigError
    from mera_pipelines.core.training.trainers import GRPOSettings

    with pytest.raises(ConfigError, match="gradient_checkpointing"):
        GRPOSettings.from_params({"trl_extra": {"gradient_checkpointing": True}})
    # arguments derived from settings, too: a duplicate would be a TypeError inside trl
    for derived in ("activation_checkpointing", "per_device_train_batch_size", "output_dir"):
        with pytest.raises(ConfigError, match=derived):
            GRPOSettings.from_params({"trl_extra": {derived: 1}})
