"""What the two studies' configurations share: :class:`Options`, a frozen dataclass that reads
and writes itself as a dict (a results file's ``config``), and the checks both use in
``__post_init__``, so a bad value gets the same message in both studies.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import fields
from typing import Any

__all__ = ["Options", "even_head_widths", "listed", "normalise"]


class Options:
    """Mix-in for a frozen dataclass of options: :meth:`to_dict`, :meth:`from_dict`,
    :meth:`replace`."""

    def to_dict(self) -> dict[str, Any]:
        """The configuration as a JSON-ready dict (lists for the list options)."""
        return {
            f.name: list(v) if isinstance(v := getattr(self, f.name), tuple) else v
            for f in fields(self)
        }

    @classmethod
    def from_dict(cls, options: Mapping[str, Any]) -> Options:
        """A configuration from a dict such as :meth:`to_dict` writes (missing keys: defaults).

        Raises:
            TypeError: ``options`` is not a mapping, or names an option that does not exist.
        """
        if not isinstance(options, Mapping):
            raise TypeError(
                f"a study configuration must be a dict of options, got {type(options).__name__}"
            )
        known = [f.name for f in fields(cls)]
        unknown = set(options) - set(known)
        if unknown:
            raise TypeError(f"unknown study option(s) {sorted(unknown)}; known: {sorted(known)}")
        return cls(**options)

    def replace(self, **overrides: Any) -> Options:
        """A copy with some options changed (checked like any new configuration)."""
        return type(self).from_dict({**self.to_dict(), **overrides})


def normalise(config: Options, name: str, value: Any) -> None:
    """Set option ``name`` of a frozen ``config`` to its checked ``value`` (``__post_init__``)."""
    object.__setattr__(config, name, value)


def listed(name: str, value: object, *, may_be_empty: bool = False) -> tuple:
    """A list option as a tuple.

    Raises:
        TypeError: ``value`` is a string, a number or not a sequence.
        ValueError: it is empty and ``may_be_empty`` is false.
    """
    if isinstance(value, (str, int)) or not isinstance(value, Sequence):
        raise TypeError(f"{name} must be a list, got {value!r}")
    if not value and not may_be_empty:
        raise ValueError(f"{name} must not be empty")
    return tuple(value)


def even_head_widths(d_model: int, n_heads: int) -> int:
    """The head width ``d_model // n_heads``, which RoPE needs even.

    Raises:
        ValueError: ``n_heads`` does not divide ``d_model`` into even head widths.
    """
    if d_model % n_heads or (d_model // n_heads) % 2:
        raise ValueError(
            f"n_heads={n_heads} must divide d_model={d_model} into even head widths, got "
            f"{d_model} / {n_heads} = {d_model / n_heads:g}"
        )
    return d_model // n_heads
