"""Numbers the chapters print, checked against closed forms computed here with ``math``.

Each test reads a value the build glued (``_build/jupyter_execute/chapters/*.glue.json``) and
compares it with an independent formula: the errata of an expert reading (chapters 7 and 9),
so that a number the text once got wrong stays right.
"""

import ast
import json
import math
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
EXECUTED = ROOT / "_build" / "jupyter_execute" / "chapters"

if not EXECUTED.is_dir():
    pytest.skip("the book has not been built (run `make book`)", allow_module_level=True)


def glued(stem: str, name: str):
    """The value a chapter glued under ``name``, read back from its text/plain form."""
    data = json.loads((EXECUTED / f"{stem}.glue.json").read_text(encoding="utf-8"))
    text = data[name]["data"]["text/plain"]
    if text.startswith("np.float64(") and text.endswith(")"):
        text = text[len("np.float64(") : -1]
    return ast.literal_eval(text)


@pytest.mark.parametrize("head", range(1, 9))
def test_alibi_weight_that_moves_is_the_geometric_tail(head):
    """Chapter 7: 512 -> 4096 keys moves the weight beyond distance 512,
    e^(-512 m)(1 - e^(-3584 m)) / (1 - e^(-4096 m)) for slope m = 2^-head (8 heads). Relative
    only (abs=0): head 1's value is 6.6e-112, and the chapter once printed half of it."""
    m = 2.0**-head
    tail = math.exp(-512 * m) * -math.expm1(-3584 * m) / -math.expm1(-4096 * m)
    assert glued("07_alibi_long_context", f"ch7-tv-{head}") == pytest.approx(tail, rel=1e-9, abs=0)


def test_rope_pair_turns_within_the_training_length():
    """Chapter 9: pair i of a 16-wide head turns L / (2 pi) * 10000^(-i/8) times in L = 64;
    pair 4 makes about a tenth of a turn, pairs 5 to 7 much less."""
    turns = [64 / (2 * math.pi) * 10000 ** (-i / 8) for i in range(8)]
    for i, expected in enumerate(turns):
        assert glued("09_beyond_one_axis", f"ch9-turns-{i}") == pytest.approx(
            expected, rel=1e-12, abs=0
        )
    assert turns[4] > 0.1 > turns[5]


def test_one_decoded_token_shows_both_decode_step_bugs():
    """Chapter 8: each bug alone moves the first decoded byte's logits; the correct step does
    not (float32 rounding only)."""
    stem = "08_when_positions_go_wrong"
    assert glued(stem, "ch8-step-gap-correct") < 1e-4
    assert glued(stem, "ch8-step-gap-position") > 0.5
    assert glued(stem, "ch8-step-gap-key") > 0.5
