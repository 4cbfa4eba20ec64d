"""The MERA method in plain Python: no Kedro imports anywhere under this package.

Usable from a notebook: ``from mera_pipelines.core import sources, memory``.
"""
