"""A scratch chapter for the site-tooling tests: one markdown cell and one code cell."""

from __future__ import annotations


def notebook(source: str) -> dict:
    """A notebook (nbformat 4 JSON) titled "A chapter" whose one code cell is ``source``."""
    return {
        "cells": [
            {"cell_type": "markdown", "id": "c0", "metadata": {}, "source": ["# A chapter\n"]},
            {
                "cell_type": "code",
                "execution_count": None,
                "id": "c1",
                "metadata": {},
                "outputs": [],
                "source": [source],
            },
        ],
        "metadata": {
            "kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"}
        },
        "nbformat": 4,
        "nbformat_minor": 5,
    }
