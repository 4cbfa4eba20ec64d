"""Kedro project settings."""

import warnings

from kedro.config import OmegaConfigLoader
from omegaconf.resolvers import oc

from mera_pipelines.hooks import LLMFailureHooks, RunReportHooks

# Deprecation chatter from libraries' own internals; nothing a user of this project can act on.
warnings.filterwarnings("ignore", message=r"register_new_resolver\(\) is deprecated")
warnings.filterwarnings("ignore", message=r"Add type hints to the `predict` method")
warnings.filterwarnings("ignore", message=r"Option '--pipeline' is deprecated")

HOOKS = (RunReportHooks(), LLMFailureHooks())

CONFIG_LOADER_CLASS = OmegaConfigLoader
CONFIG_LOADER_ARGS = {
    "base_env": "base",
    "default_run_env": "local",
    # An environment overrides single keys (e.g. llm.planner) without restating the rest.
    # Server URLs and model names may come from the environment (never keys: credentials.yml).
    "custom_resolvers": {"oc.env": oc.env},
    "merge_strategy": {"globals": "soft", "parameters": "soft", "catalog": "soft"},
    "config_patterns": {
        "parameters": ["parameters*", "parameters*/**", "**/parameters*"],
    },
}
