"""T5's relative position bias (Raffel et al. 2020, Sec. 2.1): buckets and the learned bias,
against Hugging Face's T5Attention (transformers 5.23.0) and the bucket rule in exact integer
arithmetic."""

import math

import pytest
import torch
from transformers import T5Config
from transformers.models.t5.modeling_t5 import T5Attention

from posenc_core import attention
from posenc_core.t5_bias import T5RelativePositionBias, relative_position_bucket

hf_bucket = T5Attention._relative_position_bucket

# (num_buckets, max_distance): T5's own, others a config could hold, small corner cases, and
# 34/27, where the logarithm's ratio is an exact integer at distance 12 (see test_ties_*)
BIDIRECTIONAL = [(32, 128), (16, 64), (8, 20), (64, 256), (32, 512), (6, 7), (4, 2), (34, 27)]
CAUSAL = [(32, 128), (16, 64), (8, 20), (17, 27), (19, 25), (3, 2), (2, 5), (64, 1000)]


def _distances(max_distance):
    """Relative positions around and far beyond max_distance, both signs."""
    near = torch.arange(-3 * max_distance, 3 * max_distance + 1)
    far = torch.tensor([10**4, 10**6, 2**31 - 1, 2**40])
    return torch.cat([near, far, -far])


@pytest.mark.parametrize(("bidirectional", "num_buckets", "max_distance"), [
    *[(True, nb, md) for nb, md in BIDIRECTIONAL],
    *[(False, nb, md) for nb, md in CAUSAL],
])  # fmt: skip
def test_buckets_equal_hugging_face(bidirectional, num_buckets, max_distance):
    r = _distances(max_distance)
    kw = {"bidirectional": bidirectional, "num_buckets": num_buckets, "max_distance": max_distance}
    got = relative_position_bucket(r, **kw)
    assert got.dtype == torch.int64 and got.shape == r.shape
    assert torch.equal(got, hf_bucket(r, **kw))


def test_buckets_equal_hugging_face_for_every_small_configuration():
    """Every bucket count up to 40 against a few maximum distances from E + 1 up."""
    for bidirectional in (True, False):
        for num_buckets in range(4 if bidirectional else 2, 41, 2 if bidirectional else 1):
            exact = (num_buckets // 2 if bidirectional else num_buckets) // 2
            for max_distance in (exact + 1, exact + 5, 3 * exact + 2, 128):
                r = torch.arange(-2 * max_distance - 3, 2 * max_distance + 4)
                kw = {
                    "bidirectional": bidirectional,
                    "num_buckets": num_buckets,
                    "max_distance": max_distance,
                }
                assert torch.equal(relative_position_bucket(r, **kw), hf_bucket(r, **kw)), kw


def exact_bucket(n, half, max_distance):
    """The rule of Raffel et al. in exact integer arithmetic, for a distance n >= 0 in a half of
    ``half`` buckets: n itself below E = half // 2, else E + the largest k < half - E with
    log(n/E) / log(M/E) * (half - E) >= k, i.e. n**(half-E) * E**k >= M**k * E**(half-E)."""
    e, n_log = half // 2, half - half // 2
    if n < e:
        return n
    k = 0
    while k + 1 < n_log and n**n_log * e ** (k + 1) >= max_distance ** (k + 1) * e**n_log:
        k += 1
    return e + k


def ties(half, max_distance):
    """The distances n in E+1 .. M-1 (E = half // 2) at which the logarithm's product
    log(n/E) / log(M/E) * (half - E) is exactly an integer k in 1 .. half-E-1, with that k, found
    in exact integer arithmetic: n**(half-E) * E**k == M**k * E**(half-E). At a tie float32 may
    round the product to k or just below it, and which one it does depends on the machine's
    float32 logarithm (see test_ties_*)."""
    e, n_log = half // 2, half - half // 2
    return [
        (n, k)
        for n in range(e + 1, max_distance)
        for k in range(1, n_log)
        if n**n_log * e**k == max_distance**k * e**n_log
    ]


def test_t5_defaults_follow_the_rule_in_exact_arithmetic_away_from_ties():
    """For T5's 32 buckets and 128 (all released T5, mT5, Flan-T5 and ByT5 checkpoints), the
    float32 logarithm gives the mathematically exact ids at every distance that is not a tie, on
    any machine: there the product log(n/E) / log(M/E) * (B - E) is more than 1e-3 from the
    nearest integer (measured here in float64, whose error is below 1e-13), while float32's few
    roundings of products below 16 move it by less than 1e-5 (at n = E the product is
    log(1) = 0, exact everywhere). The only ties are the encoder's distances 16, 32 and 64
    (products exactly 2, 4 and 6); test_ties_* checks them."""
    n = torch.arange(0, 1100)
    for bidirectional, half in ((False, 32), (True, 16)):
        e, n_log = half // 2, half - half // 2
        tied = {d for d, _ in ties(half, 128)}
        assert tied == (set() if not bidirectional else {16, 32, 64})
        products = [n_log * math.log(d / e) / math.log(128 / e) for d in range(e + 1, 128)]
        margins = [abs(p - round(p)) for d, p in zip(range(e + 1, 128), products) if d not in tied]
        assert min(margins) > 1e-3
        keep = [d for d in n.tolist() if d not in tied]
        if bidirectional:
            before = relative_position_bucket(-torch.tensor(keep))
            after = relative_position_bucket(torch.tensor(keep[1:]))  # from distance 1 on
            assert before.tolist() == [exact_bucket(d, 16, 128) for d in keep]
            assert after.tolist() == [16 + exact_bucket(d, 16, 128) for d in keep[1:]]
        else:
            causal = relative_position_bucket(-torch.tensor(keep), bidirectional=False)
            assert causal.tolist() == [exact_bucket(d, 32, 128) for d in keep]


@pytest.mark.parametrize(("bidirectional", "num_buckets", "max_distance"), [
    (False, 17, 27),  # E = 8, 27/8 = (12/8)**3: products exactly 3 at 12, 6 at 18
    (True, 34, 27),  # the same in both halves of an encoder
    (True, 32, 128),  # T5's encoder: exactly 2, 4, 6 at 16, 32, 64
    (False, 51, 49),  # E = 25, 49/25 = (35/25)**2: exactly 13 at 35
    (False, 48, 81),  # E = 24, 81/24 = (3/2)**3: exactly 8 at 36, 16 at 54
])  # fmt: skip
def test_ties_follow_t5s_float32_logarithm_not_exact_arithmetic(
    bidirectional, num_buckets, max_distance
):
    """At a tie (see ties()) the exact rule gives E + k, while float32, as Mesh TensorFlow and
    Hugging Face evaluate the rule, gives E + k or E + k - 1, depending on how this machine's
    float32 logarithm rounds (causal, 17 buckets, max_distance 27 at distance 12: bucket 10 on
    one machine, 11 on another). We give the id Hugging Face's formula gives, evaluated here and
    now (and hence the id a checkpoint trained with T5's code saw), not the exact one: a stated
    choice. So the id is Hugging Face's, one of the two candidates, and the one float32 rounding
    picks on this machine, whichever that is."""
    half = num_buckets // 2 if bidirectional else num_buckets
    e, n_log = half // 2, half - half // 2
    kw = {"bidirectional": bidirectional, "num_buckets": num_buckets, "max_distance": max_distance}
    found = ties(half, max_distance)
    assert found  # exact arithmetic: the configuration has ties
    for n, k in found:
        exact = exact_bucket(n, half, max_distance)
        assert exact == e + k  # the exact rule puts the distance in bucket E + k
        for r in (
            (torch.tensor([-n]), torch.tensor([n])) if bidirectional else (torch.tensor([-n]),)
        ):
            got = relative_position_bucket(r, **kw).item()
            assert got == hf_bucket(r, **kw).item(), (n, r.item())
            shift = half if r.item() > 0 else 0  # keys after the query: the upper half
            assert got - shift in (exact - 1, exact), (n, r.item())
            # how float32 decides the tie here: T5's formula on this machine
            product = (torch.log(torch.tensor([float(n)]) / e) / math.log(max_distance / e)) * n_log
            assert got - shift == (exact - 1 if product.item() < k else exact), (n, product.item())


@pytest.mark.parametrize(("bidirectional", "num_buckets", "max_distance"), [
    (True, 32, 128), (False, 32, 128), (True, 16, 40), (False, 9, 50),
])  # fmt: skip
def test_bucket_shape_exact_region_monotone_and_saturating(
    bidirectional, num_buckets, max_distance
):
    half = num_buckets // 2 if bidirectional else num_buckets
    exact = half // 2
    kw = {"bidirectional": bidirectional, "num_buckets": num_buckets, "max_distance": max_distance}
    n = torch.arange(0, 4 * max_distance)
    back = relative_position_bucket(-n, **kw)  # keys 0, 1, 2, ... positions before the query
    assert torch.equal(back[:exact], n[:exact])  # the exact region is the identity
    assert bool((back.diff() >= 0).all())  # ids never fall as the distance grows
    assert bool((back.diff() <= 1).all())  # ... and skip no bucket
    assert bool((back[max_distance:] == half - 1).all())  # one bucket for all far keys
    assert back[max_distance - 1] <= half - 1 and back.max() == half - 1
    extreme = torch.tensor([torch.iinfo(torch.int64).min, -(10**15)])
    assert relative_position_bucket(extreme, **kw).tolist() == [half - 1, half - 1]
    ahead = relative_position_bucket(n, **kw)  # keys after the query
    if bidirectional:  # the upper half, the same shape shifted by half
        assert ahead[0] == 0 and torch.equal(ahead[1:], back[1:] + half)
    else:  # masked in a decoder: all in bucket 0, the query's own
        assert bool((ahead == 0).all())


def test_t5_defaults_use_every_bucket_but_the_upper_halfs_first():
    """A decoder uses all 32 buckets; an encoder 31, since distance 0 belongs to the lower half
    and bucket 16 (the upper half's "distance 0") is never used, as in Hugging Face."""
    r = torch.arange(-200, 201)
    used = relative_position_bucket(r).unique()
    assert torch.equal(used, torch.cat([torch.arange(16), torch.arange(17, 32)]))
    assert torch.equal(used, hf_bucket(r).unique())
    causal = relative_position_bucket(r, bidirectional=False)
    assert torch.equal(causal.unique(), torch.arange(32))


@pytest.mark.parametrize("dtype", [torch.int8, torch.int16, torch.int32, torch.uint8])
def test_integer_dtypes_and_shapes(dtype):
    info = torch.iinfo(dtype)
    r = torch.arange(max(info.min, -100), min(info.max, 100) + 1).to(dtype).reshape(1, -1, 1)
    got = relative_position_bucket(r, bidirectional=False)
    assert got.dtype == torch.int64 and got.shape == r.shape
    assert torch.equal(got, relative_position_bucket(r.long(), bidirectional=False))
    assert relative_position_bucket(torch.tensor(-9, dtype=dtype)).shape == ()
    assert relative_position_bucket(torch.zeros(0, 3, dtype=dtype)).shape == (0, 3)


def _hf_attention(num_heads, num_buckets, max_distance, *, decoder, d_model=16, d_kv=4):
    config = T5Config(
        d_model=d_model,
        d_kv=d_kv,
        num_heads=num_heads,
        num_layers=1,
        relative_attention_num_buckets=num_buckets,
        relative_attention_max_distance=max_distance,
        is_decoder=decoder,
        dropout_rate=0.0,
    )
    config._attn_implementation = "eager"
    return T5Attention(config, has_relative_attention_bias=True, layer_idx=0).eval()


@pytest.mark.parametrize(("decoder", "num_buckets", "max_distance", "q_len", "k_len", "offset"), [
    (False, 32, 128, 300, 300, 0),  # encoder, distances past max_distance
    (False, 8, 20, 17, 23, 0),
    (True, 32, 128, 40, 40, 0),  # decoder, a full pass
    (True, 32, 128, 1, 301, 300),  # decoding one token with 300 cached
    (True, 16, 30, 5, 12, 7),  # a chunk of 5 after 7 cached
])  # fmt: skip
def test_bias_equals_hugging_face_compute_bias(
    decoder, num_buckets, max_distance, q_len, k_len, offset
):
    hf = _hf_attention(3, num_buckets, max_distance, decoder=decoder)
    ours = T5RelativePositionBias(
        3, bidirectional=not decoder, num_buckets=num_buckets, max_distance=max_distance
    )
    with torch.no_grad():
        ours.relative_attention_bias.weight.copy_(hf.relative_attention_bias.weight)
        expected = hf.compute_bias(q_len, k_len, past_seen_tokens=offset)  # (1, h, q, k)
        got = ours(q_len, k_len, offset=offset)
    assert got.shape == (3, q_len, k_len)
    assert torch.equal(got, expected[0])


@pytest.mark.parametrize("decoder", [False, True])
def test_attention_with_scaled_queries_equals_hugging_face_t5_attention(decoder):
    """T5 adds the bias to unscaled q k^T; posenc_core.attention divides q k^T by sqrt(d_h) and
    adds the bias as given, so q * sqrt(d_h) reproduces T5's layer (the docstring's recipe)."""
    hf = _hf_attention(4, 32, 128, decoder=decoder, d_model=16, d_kv=8).double()
    ours = T5RelativePositionBias(4, bidirectional=not decoder).double()
    b, s = 2, 150
    x = torch.randn(b, s, 16, dtype=torch.float64)
    mask = None
    if decoder:  # Hugging Face takes the causal mask as an additive (b, 1, q, k) tensor
        mask = torch.full((s, s), -math.inf, dtype=torch.float64).triu(1)[None, None]
    with torch.no_grad():
        ours.relative_attention_bias.weight.copy_(hf.relative_attention_bias.weight)
        expected = hf(x, mask=mask)[0]  # (b, s, d_model)

        def heads(t):  # (b, s, h * d_kv) -> (b, h, s, d_kv)
            return t.view(b, s, 4, 8).transpose(1, 2)

        q, k, v = heads(hf.q(x)), heads(hf.k(x)), heads(hf.v(x))
        ctx = attention(q * math.sqrt(8), k, v, bias=ours(s, s), causal=decoder)  # (b, h, s, d_kv)
        got = hf.o(ctx.transpose(1, 2).reshape(b, s, 32))
        unscaled = attention(q, k, v, bias=ours(s, s), causal=decoder)
    torch.testing.assert_close(got, expected, rtol=1e-12, atol=1e-12)
    assert not torch.allclose(hf.o(unscaled.transpose(1, 2).reshape(b, s, 32)), expected)


def test_bias_depends_only_on_key_minus_query():
    """Toeplitz: shifting query and key by one leaves the bias unchanged, decoding rows are the
    last rows of the full pass, and each entry is the table's value for its bucket."""
    for bidirectional in (True, False):
        module = T5RelativePositionBias(2, bidirectional=bidirectional, num_buckets=16)
        with torch.no_grad():
            full = module(200, 200)
            step = module(3, 200, offset=197)
        assert torch.equal(full[:, 1:, 1:], full[:, :-1, :-1])
        assert torch.equal(step, full[:, 197:])
        i, j = 150, 3  # key 147 positions back
        bucket = relative_position_bucket(
            torch.tensor(j - i), bidirectional=bidirectional, num_buckets=16
        )
        assert torch.equal(full[:, i, j], module.relative_attention_bias.weight[bucket])


def test_table_initialisation_and_dtype():
    module = T5RelativePositionBias(64, init_std=0.125)
    w = module.relative_attention_bias.weight
    assert w.shape == (32, 64)
    assert 0.11 < w.std().item() < 0.14 and abs(w.mean().item()) < 0.01  # 2048 normal samples
    module = module.to(torch.float64)
    assert module(4, 4).dtype == torch.float64


@pytest.mark.parametrize(("call", "error", "message"), [
    (lambda: relative_position_bucket([1, 2]), TypeError,
     r"relative_position must be an integer torch.Tensor .* got list"),
    (lambda: relative_position_bucket(torch.tensor([1.0])), TypeError,
     r"relative_position must be an integer tensor .* got dtype torch.float32"),
    (lambda: relative_position_bucket(torch.tensor([True])), TypeError,
     r"relative_position must be an integer tensor .* got dtype torch.bool"),
    (lambda: relative_position_bucket(torch.tensor([1]), bidirectional=1), TypeError,
     r"bidirectional must be True or False, got int 1"),
    (lambda: relative_position_bucket(torch.tensor([1]), num_buckets=31), ValueError,
     r"num_buckets must be an even integer >= 4 when bidirectional=True.* got 31"),
    (lambda: relative_position_bucket(torch.tensor([1]), num_buckets=2), ValueError,
     r"num_buckets must be an even integer >= 4 when bidirectional=True.* got 2"),
    (lambda: relative_position_bucket(torch.tensor([1]), bidirectional=False, num_buckets=1),
     ValueError, r"num_buckets must be an integer >= 2 when bidirectional=False.* got 1"),
    (lambda: relative_position_bucket(torch.tensor([1]), num_buckets=32.0), TypeError,
     r"num_buckets must be a positive integer, got float 32.0"),
    (lambda: relative_position_bucket(torch.tensor([1]), max_distance=8), ValueError,
     r"max_distance must be an integer greater than the 8 exact buckets per direction.* got 8"),
    (lambda: relative_position_bucket(torch.tensor([1]), max_distance=0), ValueError,
     r"max_distance must be a positive integer, got 0"),
    (lambda: T5RelativePositionBias(0), ValueError, r"num_heads must be a positive integer, got 0"),
    (lambda: T5RelativePositionBias(2, bidirectional=False, max_distance=16), ValueError,
     r"max_distance must be an integer greater than the 16 exact buckets .* got 16"),
    (lambda: T5RelativePositionBias(2, init_std=-1.0), ValueError,
     r"init_std must be a positive number, got -1.0"),
    (lambda: T5RelativePositionBias(2, init_std="1"), TypeError,
     r"init_std must be a real number, got str '1'"),
    (lambda: T5RelativePositionBias(2)(0, 4), ValueError,
     r"query_length must be a positive integer, got 0"),
    (lambda: T5RelativePositionBias(2)(4, 1.5), TypeError,
     r"key_length must be a positive integer, got float 1.5"),
    (lambda: T5RelativePositionBias(2)(4, 4, offset=-1), ValueError,
     r"offset must be a non-negative integer, got -1"),
])  # fmt: skip
def test_bad_input_names_the_argument(call, error, message):
    with pytest.raises(error, match=message):
        call()
