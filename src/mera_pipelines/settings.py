"""Kedro project settings."""

import warnings

from kedro.config import OmegaConfigLoader

from mera_pipelines.hooks import RunReportHooks

# Deprecation chatter from libraries' own internals; nothing a user of this project can act on.
warnings.filterwarnings("ignore", message=r"register_new_resolver\(\) is deprecated")
warnings.filterwarnings("ignore", message=r"Add type hints to the `predict` method")
warnings.filterwarnings("ignore", message=r"Option '--pipeline' is deprecated")

HOOKS = (RunReportHooks(),)

CONFIG_LOADER_CLASS = OmegaConfigLoader
CONFIG_LOADER_ARGS = {
    "base_env": "base",
    "default_run_env": "local",
    "config_patterns": {
        "parameters": ["parameters*", "parameters*/**", "**/parameters*"],
    },
}
