"""The exercise checkers accept right answers, reject wrong ones, and name the usual mistake."""

import math

import pytest
import torch

import posenc_core as pc
from posenc_core.book import exercises


def test_check_frequencies_recognises_common_mistakes():
    d, base = 16, 10000.0
    i = torch.arange(d // 2, dtype=torch.float64)
    right = [base ** (-2 * k / d) for k in range(d // 2)]  # the paper's formula, by hand
    assert exercises.check_frequencies(right, d)
    assert exercises.check_frequencies(
        torch.tensor(right, dtype=torch.float32), d
    )  # float32 is fine
    cases = {
        "2i": base ** (-i / d),
        "starts at 1": base ** (-2 * (i + 1) / d),
        "inverses": base ** (2 * i / d),
        "wavelengths": 2 * math.pi * base ** (2 * i / d),
        "one per pair": torch.ones(d),
    }
    for hint, answer in cases.items():
        fb = exercises.check_frequencies(answer, d)
        assert not fb and hint in fb.message, (hint, fb.message)


def test_check_sinusoidal_table_recognises_common_mistakes():
    n, d = 12, 8
    pos = torch.arange(n, dtype=torch.float64)[:, None]
    omega = torch.tensor([10000.0 ** (-2 * k / d) for k in range(d // 2)], dtype=torch.float64)
    sin, cos = torch.sin(pos * omega), torch.cos(pos * omega)
    right = torch.stack((sin, cos), -1).reshape(n, d)
    assert exercises.check_sinusoidal_table(right)
    wrong = {
        "swapped": torch.stack((cos, sin), -1).reshape(n, d),
        "half layout": torch.cat((sin, cos), -1),
        "start at 1": torch.stack(
            (torch.sin((pos + 1) * omega), torch.cos((pos + 1) * omega)), -1
        ).reshape(n, d),
        "instead of 2i": torch.stack(
            (torch.sin(pos * omega.sqrt()), torch.cos(pos * omega.sqrt())), -1
        ).reshape(n, d),
    }
    for hint, answer in wrong.items():
        fb = exercises.check_sinusoidal_table(answer)
        assert not fb and hint in fb.message, (hint, fb.message)
    noisy = right.clone()
    noisy[5, 3] += 0.1
    fb = exercises.check_sinusoidal_table(noisy)
    assert not fb and "position 5, dimension 3" in fb.message


def test_check_equivariance():
    w = torch.randn(16, 16)
    assert exercises.check_equivariance(lambda x: pc.self_attention(x, w, w, w))
    fb = exercises.check_equivariance(lambda x: pc.self_attention(x, w, w, w, causal=True))
    assert not fb and "not permutation-equivariant" in fb.message
    with pytest.raises(TypeError, match="fn must be callable"):
        exercises.check_equivariance(3)
    with pytest.raises(ValueError, match="one row per token"):
        exercises.check_equivariance(lambda x: x.sum())


def test_check_close_and_feedback_display():
    assert exercises.check_close(0.5, 0.5, "the slope")
    fb = exercises.check_close(0.4, 0.5, "the slope")
    assert not fb and "expected 0.5, got 0.4" in fb.message
    assert str(fb).startswith("Not yet") and fb._repr_markdown_().startswith("**Not yet.**")
    assert "shape" in exercises.check_close([1.0, 2.0], 1.0, "x").message
    with pytest.raises(TypeError, match="answer"):
        exercises.check_close("0.5", 0.5, "x")


def test_check_close_keeps_python_float_precision():
    """A Python float must not pass through float32 (40889.9 would become 40889.90234375)."""
    assert exercises.check_close(
        40889.9, torch.tensor(40889.9, dtype=torch.float64), "x", rtol=1e-12
    )


def test_a_printed_verdict_fits_the_code_column():
    """A long verdict wraps at the book's column width (80) and keeps every word."""
    from posenc_core.book.exercises import WIDTH, Feedback

    message = "fn is not permutation-equivariant: " + ", ".join(
        f"entry {i} differs" for i in range(30)
    )
    text = str(Feedback(False, message))
    assert max(len(line) for line in text.splitlines()) <= WIDTH
    assert text.split() == ("Not yet: " + message).split()


def test_check_reversal_cap_recognises_common_mistakes():
    n, vocab, k = 64, 16, 3
    # by hand: positions i < k pair a NONE target with a token (bound 1/2 each side), the
    # others two different random tokens (bound (1 + 1/V)/2); the k mirrored positions too
    edge, inner = 0.5, (1 + 1 / vocab) / 2
    right = (2 * k * edge + (n - 2 * k) * inner) / n
    assert exercises.check_reversal_cap(right, n, vocab, k=k)
    for answer, hint in ((0.5, "leaves out the chance"), (inner, "near them"), (1 / 16, "guess")):
        fb = exercises.check_reversal_cap(answer, n, vocab, k=k)
        assert not fb and hint in fb.message, (answer, fb.message)
    assert not exercises.check_reversal_cap(0.7, n, vocab, k=k)


def test_prope_checker_accepts_the_identity_and_names_the_mistakes():
    from posenc_core.book import exercises as ex
    from posenc_core.rope import rope_frequencies

    # independent: the four fastest frequencies of a 16-dim head, base 10000
    kept = 10000.0 ** (-torch.arange(0, 8, 2, dtype=torch.float64) / 16)
    torch.testing.assert_close(rope_frequencies(8, base=100.0).double(), kept)
    assert ex.check_prope_equivalent(8, 100.0)
    assert "smaller base" in ex.check_prope_equivalent(8, 10000.0).message
    assert "keeps p * 16/2 = 4 pairs" in ex.check_prope_equivalent(16, 100.0).message
    assert not ex.check_prope_equivalent(8, 50.0)
    assert not ex.check_prope_equivalent(7, 100.0)


def test_mrope_checker_compares_with_qwen2_vl_rule():
    from posenc_core.book import exercises as ex

    segments = [("text", 2), ("image", (1, 2, 2)), ("text", 1)]
    by_hand = [[0, 1, 2, 2, 2, 2, 4], [0, 1, 2, 2, 3, 3, 4], [0, 1, 2, 3, 2, 3, 4]]
    assert ex.check_mrope_positions(by_hand, segments)
    swapped = [by_hand[0], by_hand[2], by_hand[1]]
    assert "swapped" in ex.check_mrope_positions(swapped, segments).message
    counted = [row[:6] + [6] for row in by_hand]  # text resumes at the token count
    fb = ex.check_mrope_positions(counted, segments)
    assert not fb and "token 6" in fb.message and "expected 4" in fb.message
    assert "shape" in ex.check_mrope_positions(by_hand[:2], segments).message


def test_sink_position_checker_names_text_positions_and_the_query_slot():
    def broken(n, size, sinks):  # chapter 8b's starting point
        kept = list(range(min(sinks, n))) + list(range(max(sinks, n - (size - sinks)), n))
        return kept, n

    def query_fixed(n, size, sinks):
        kept = list(range(min(sinks, n))) + list(range(max(sinks, n - (size - sinks)), n))
        return kept, len(kept) - 1

    def right(n, size, sinks):
        m = min(n, size)
        return list(range(m)), m - 1

    verdict = exercises.check_sink_positions(broken)
    assert not verdict and "one past the last key" in verdict.message
    verdict = exercises.check_sink_positions(query_fixed)
    assert not verdict and "keep their positions in the text" in verdict.message
    assert exercises.check_sink_positions(right)
    assert not exercises.check_sink_positions(lambda n, size, sinks: 1 / 0)
    assert "pair" in exercises.check_sink_positions(lambda n, size, sinks: [0]).message


def test_rollback_checker_names_untrimmed_values_and_the_minus_zero_slice():
    def broken(cache, proposed, accepted):  # chapter 8b's starting point
        rejected = proposed - accepted
        cache["k"] = cache["k"][..., :-rejected, :]
        return cache

    def both(cache, proposed, accepted):
        rejected = proposed - accepted
        return {name: x[..., :-rejected, :] for name, x in cache.items()}

    def right(cache, proposed, accepted):
        keep = cache["k"].shape[-2] - proposed + accepted
        return {name: x[..., :keep, :] for name, x in cache.items()}

    verdict = exercises.check_rollback(broken)
    assert not verdict and "its values hold 14" in verdict.message
    verdict = exercises.check_rollback(both)
    assert not verdict and ":-0" in verdict.message
    assert exercises.check_rollback(right)
    wrong_end = exercises.check_rollback(
        lambda c, p, a: {n: x[..., p - a :, :] for n, x in c.items()}
    )
    assert not wrong_end and "first" in wrong_end.message
