"""Errors users see. Each names the file, the record and the field that is wrong."""

from __future__ import annotations


class MeraError(Exception):
    """Base class for errors that end a run with a clear, one-paragraph message."""


class InputDataError(MeraError):
    """A source file that cannot be read as the format it claims to be."""

    def __init__(self, path: str, record: str, field: str, problem: str) -> None:
        self.path = str(path)
        self.record = record
        self.field = field
        self.problem = problem
        super().__init__(
            f"Invalid input in file '{self.path}', record {record}, field '{field}': {problem}"
        )


class ConfigError(MeraError):
    """A parameter or configuration value that cannot work."""


class LLMCallError(MeraError):
    """An LLM call that failed after every retry and repair.

    ``tokens_in`` / ``tokens_out``: what the failed attempts still cost (replies that could not
    be used), so a role's usage report counts them too.
    """

    def __init__(self, message: str, *, tokens_in: int = 0, tokens_out: int = 0) -> None:
        super().__init__(message)
        self.tokens_in = tokens_in
        self.tokens_out = tokens_out
