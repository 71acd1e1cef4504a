"""The retrieval probe: its sequences hold the span where they should, and its loss equals a
direct count of a hand-written copying model's hits and misses."""

from __future__ import annotations

import math

import pytest
import torch

from posenc_core.book.studies.retrieval import probe_sequences, repeat_probe

LENGTH, SPAN, SAMPLES = 64, 8, 5
DATA = torch.randint(
    0, 256, (2 * SAMPLES * LENGTH + 7,), generator=torch.Generator().manual_seed(3)
)


def test_the_copy_holds_the_span_twice_and_the_control_once():
    d = 20
    copy, control = probe_sequences(DATA, length=LENGTH, distance=d, span=SPAN, samples=SAMPLES)
    for j in range(SAMPLES):
        base = DATA[j * LENGTH : (j + 1) * LENGTH]
        span = DATA[(SAMPLES + j) * LENGTH : (SAMPLES + j) * LENGTH + SPAN]
        first = LENGTH - SPAN - d
        assert torch.equal(copy[j, LENGTH - SPAN :], span)
        assert torch.equal(copy[j, first : first + SPAN], span)
        assert torch.equal(control[j, LENGTH - SPAN :], span)
        assert torch.equal(control[j, : LENGTH - SPAN], base[: LENGTH - SPAN])
        outside = torch.ones(LENGTH, dtype=torch.bool)
        outside[first : first + SPAN] = False
        outside[LENGTH - SPAN :] = False
        assert torch.equal(copy[j, outside], base[outside])


A = 5.0  # the copier's logit on its guess


def copier(x: torch.Tensor) -> torch.Tensor:
    """Guesses that byte t + 1 follows the last earlier occurrence of bytes (t - 1, t); no guess
    (uniform) without one."""
    logits = torch.zeros(*x.shape, 256)
    for b, row in enumerate(x.tolist()):
        for t in range(1, len(row)):
            for p in range(t - 1, 0, -1):
                if row[p - 1 : p + 1] == row[t - 1 : t + 1]:
                    logits[b, t, row[p + 1]] = A
                    break
    return logits


def direct_count(x: torch.Tensor) -> float:
    """The copier's mean loss on bytes P - m + 1 .. P - 1, counted guess by guess."""
    hit, miss = math.log(math.exp(A) + 255) - A, math.log(math.exp(A) + 255)
    total, n = 0.0, 0
    for row in x.tolist():
        for t in range(LENGTH - SPAN, LENGTH - 1):
            guess = next((row[p + 1] for p in range(t - 1, 0, -1)
                          if row[p - 1 : p + 1] == row[t - 1 : t + 1]), None)  # fmt: skip
            total += math.log(256) if guess is None else hit if guess == row[t + 1] else miss
            n += 1
    return total / n


@pytest.mark.parametrize("distances", [(8,), (8, 30, 56)])
def test_the_probe_equals_a_direct_count_of_a_copying_model(distances):
    got = repeat_probe(copier, DATA, length=LENGTH, distances=distances, span=SPAN,
                       samples=SAMPLES, batch=2)  # fmt: skip
    for d in distances:
        copy, control = probe_sequences(DATA, length=LENGTH, distance=d, span=SPAN,
                                        samples=SAMPLES)  # fmt: skip
        assert got[str(d)]["copy"] == pytest.approx(direct_count(copy), rel=1e-6)
        assert got[str(d)]["control"] == pytest.approx(direct_count(control), rel=1e-6)
        assert got[str(d)]["copy"] < got[str(d)]["control"]  # the copier finds the first copy


def test_bad_probe_settings_are_refused():
    with pytest.raises(ValueError, match="distance must be from span=8"):
        probe_sequences(DATA, length=LENGTH, distance=4, span=SPAN, samples=SAMPLES)
    with pytest.raises(ValueError, match="distance must be .* length - span = 56, got 57"):
        probe_sequences(DATA, length=LENGTH, distance=57, span=SPAN, samples=SAMPLES)
    with pytest.raises(ValueError, match="span must be >= 2"):
        probe_sequences(DATA, length=LENGTH, distance=8, span=1, samples=SAMPLES)
    with pytest.raises(ValueError, match="need 640"):
        probe_sequences(DATA[:100], length=LENGTH, distance=8, span=SPAN, samples=SAMPLES)
    with pytest.raises(TypeError, match="logits_of must be callable"):
        repeat_probe(None, DATA, length=LENGTH, distances=(8,), span=SPAN, samples=SAMPLES)
