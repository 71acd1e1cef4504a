#!/usr/bin/env python3
"""Fetch the pinned third-party browser files the book serves itself (standard library only).

For every package in _vendor/vendor.lock.json:
  1. reuse _vendor/cache/<name>-<version>.tgz when its sha512 matches the lock's `integrity`,
     otherwise download it with `npm pack` (the only network access; none when the cache is good);
  2. refuse a download whose sha512 differs from the lock (exit status 1, nothing extracted);
  3. write exactly the lock's `files` to _vendor/site/<dest>/ (leading `package/` removed),
     rewriting only files whose bytes differ and deleting anything else under _vendor/site/;
  4. check that each of the lock's optional `build_inputs` (glob patterns of paths inside the
     tarball) matches at least one file. Those files are not served: `make fonts`
     (tools/cjk_font.py) reads the font slices from the verified tarball with `build_inputs()`
     and cuts the committed CJK subset in _static/cjk/.

`make book` runs this first; _config.yml names _vendor/site in html_extra_path, so Sphinx copies it
into _build/html/ (never under _static/: Jupyter Book would add every .js/.css there to every page).

    python _vendor/fetch.py           # fetch if needed, verify, extract
    python _vendor/fetch.py --check   # verify cache and _vendor/site only; no network, no writes
"""

from __future__ import annotations

import argparse
import base64
import fnmatch
import hashlib
import json
import pathlib
import shutil
import subprocess
import sys
import tarfile
import tempfile

HERE = pathlib.Path(__file__).resolve().parent
LOCK = HERE / "vendor.lock.json"
CACHE = HERE / "cache"
SITE = HERE / "site"
PREFIX = "package/"


class VendorError(Exception):
    pass


def load_lock(path: pathlib.Path = LOCK) -> list[dict]:
    packages = json.loads(path.read_text(encoding="utf-8"))["packages"]
    for pkg in packages:
        for key in ("package", "version", "integrity", "dest", "files"):
            if key not in pkg:
                raise VendorError(f"{path.name}: {pkg.get('package', '?')} has no {key!r}")
        if not pkg["integrity"].startswith("sha512-"):
            raise VendorError(
                f"{path.name}: {pkg['package']}: integrity must be sha512-<base64> (SRI)"
            )
        for name in pkg["files"] + pkg.get("build_inputs", []):
            if not name.startswith(PREFIX) or ".." in pathlib.PurePosixPath(name).parts:
                raise VendorError(f"{path.name}: {pkg['package']}: bad file path {name!r}")
    return packages


def sri_sha512(path: pathlib.Path) -> str:
    digest = hashlib.sha512()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return "sha512-" + base64.b64encode(digest.digest()).decode("ascii")


def tarball_path(pkg: dict) -> pathlib.Path:
    # the file name `npm pack` gives: @scope/name -> scope-name-<version>.tgz
    name = pkg["package"].lstrip("@").replace("/", "-")
    return CACHE / f"{name}-{pkg['version']}.tgz"


def served_path(pkg: dict, name: str) -> pathlib.Path:
    return SITE / pkg["dest"] / name[len(PREFIX) :]


def npm_pack(pkg: dict) -> pathlib.Path:
    """Download the package tarball into the cache with `npm pack`; return its path."""
    spec = f"{pkg['package']}@{pkg['version']}"
    npm = shutil.which("npm")
    if npm is None:
        raise VendorError(f"{spec} is not in {CACHE} and npm is not installed to download it")
    CACHE.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=CACHE) as tmp:
        print(f"vendor: downloading {spec} (npm pack)", file=sys.stderr)
        run = subprocess.run(
            [npm, "pack", spec, "--json", "--pack-destination", tmp],
            cwd=tmp,
            capture_output=True,
            text=True,
        )
        if run.returncode != 0:
            raise VendorError(f"`npm pack {spec}` failed:\n{run.stderr.strip()}")
        made = list(pathlib.Path(tmp).glob("*.tgz"))
        if len(made) != 1:
            raise VendorError(f"`npm pack {spec}` left {len(made)} tarballs, expected 1")
        got = sri_sha512(made[0])
        if got != pkg["integrity"]:
            raise VendorError(
                f"INTEGRITY MISMATCH for {spec}: the downloaded tarball has\n  {got}\n"
                f"but {LOCK.name} pins\n  {pkg['integrity']}\nRefusing to use it."
            )
        target = tarball_path(pkg)
        made[0].replace(target)
    return target


def verified_tarball(pkg: dict, download: bool = True) -> pathlib.Path:
    """The cached tarball, checked against the lock; downloaded first if missing or bad."""
    path = tarball_path(pkg)
    if path.exists():
        if sri_sha512(path) == pkg["integrity"]:
            return path
        if not download:
            raise VendorError(f"{path} does not match the integrity in {LOCK.name}")
        print(f"vendor: {path.name} does not match {LOCK.name}; discarding it", file=sys.stderr)
        path.unlink()
    elif not download:
        raise VendorError(f"{path} is missing (run `python _vendor/fetch.py`)")
    return npm_pack(pkg)


def tar_members(path: pathlib.Path, names: list[str]) -> dict[str, bytes]:
    """The bytes of the named regular files in a tarball; error if any is missing."""
    found: dict[str, bytes] = {}
    with tarfile.open(path, "r:gz") as tar:
        for member in tar:
            if member.name in names and member.isfile():
                found[member.name] = tar.extractfile(member).read()
    missing = sorted(set(names) - set(found))
    if missing:
        raise VendorError(f"{path.name} has no {', '.join(missing)}")
    return found


def build_inputs(pkg: dict, download: bool = False) -> dict[str, bytes]:
    """The tarball files matching the lock's `build_inputs` patterns, read from the verified
    cached tarball (never from anything extracted); error if a pattern matches nothing."""
    patterns = pkg.get("build_inputs", [])
    tarball = verified_tarball(pkg, download=download)
    found: dict[str, bytes] = {}
    matched: set[str] = set()
    with tarfile.open(tarball, "r:gz") as tar:
        for member in tar:
            hits = [p for p in patterns if fnmatch.fnmatchcase(member.name, p)]
            if hits and member.isfile():
                matched.update(hits)
                found[member.name] = tar.extractfile(member).read()
    unmatched = [p for p in patterns if p not in matched]
    if unmatched:
        raise VendorError(f"{tarball.name} has no file matching {', '.join(unmatched)}")
    return found


def expected_files(packages: list[dict], download: bool) -> dict[pathlib.Path, bytes]:
    out: dict[pathlib.Path, bytes] = {}
    for pkg in packages:
        tarball = verified_tarball(pkg, download=download)
        manifest = json.loads(
            tar_members(tarball, [PREFIX + "package.json"])[PREFIX + "package.json"]
        )
        if (manifest.get("name"), manifest.get("version")) != (pkg["package"], pkg["version"]):
            raise VendorError(
                f"{tarball.name} holds {manifest.get('name')}@{manifest.get('version')}, "
                f"not {pkg['package']}@{pkg['version']}"
            )
        for name, data in tar_members(tarball, pkg["files"]).items():
            out[served_path(pkg, name)] = data
        if pkg.get("build_inputs"):
            build_inputs(pkg, download=False)  # the patterns still match (tarball verified above)
    return out


def sync(expected: dict[pathlib.Path, bytes]) -> tuple[int, int]:
    """Make SITE hold exactly `expected`; return (files written, files removed)."""
    written = removed = 0
    for path, data in expected.items():
        if path.is_file() and path.read_bytes() == data:
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        written += 1
    if SITE.exists():
        for path in sorted(SITE.rglob("*"), reverse=True):
            if path.is_dir():
                if not any(path.iterdir()):
                    path.rmdir()
            elif path not in expected:
                path.unlink()
                removed += 1
    return written, removed


def check(expected: dict[pathlib.Path, bytes]) -> list[str]:
    problems = [
        f"{p.relative_to(HERE)} differs from the tarball or is missing"
        for p, data in expected.items()
        if not (p.is_file() and p.read_bytes() == data)
    ]
    if SITE.exists():
        problems += [
            f"{p.relative_to(HERE)} is not in {LOCK.name}"
            for p in SITE.rglob("*")
            if p.is_file() and p not in expected
        ]
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--check",
        action="store_true",
        help="verify the cache and _vendor/site against the lock; no network, no writes",
    )
    args = parser.parse_args(argv)
    try:
        packages = load_lock()
        expected = expected_files(packages, download=not args.check)
        if args.check:
            problems = check(expected)
            for line in problems:
                print(f"vendor: {line}", file=sys.stderr)
            return 1 if problems else 0
        written, removed = sync(expected)
    except VendorError as err:
        print(f"vendor: ERROR: {err}", file=sys.stderr)
        return 1
    versions = ", ".join(f"{p['package']}@{p['version']}" for p in packages)
    print(
        f"vendor: {versions} verified; {len(expected)} files in {SITE.relative_to(HERE.parent)}/"
        f" ({written} written, {removed} removed)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
