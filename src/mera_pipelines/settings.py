"""Kedro project settings."""

from kedro.config import OmegaConfigLoader

from mera_pipelines.hooks import RunReportHooks

HOOKS = (RunReportHooks(),)

CONFIG_LOADER_CLASS = OmegaConfigLoader
CONFIG_LOADER_ARGS = {
    "base_env": "base",
    "default_run_env": "local",
    "config_patterns": {
        "parameters": ["parameters*", "parameters*/**", "**/parameters*"],
    },
}
