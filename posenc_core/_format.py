"""How the modules print: reprs that fit the book's 80-character code column."""

from __future__ import annotations

WIDTH = 80


def extra_repr(owner: object, fields: list[str]) -> str:
    """``extra_repr`` for an ``nn.Module``: its fields on one line when ``Name(fields)`` fits
    in :data:`WIDTH` characters, otherwise one field per line (torch then indents them)."""
    line = ", ".join(fields)
    if len(type(owner).__name__) + len(line) + 2 <= WIDTH:
        return line
    return ",\n".join(fields)
