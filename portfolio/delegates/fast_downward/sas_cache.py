"""A translation cache on disk: Fast Downward's SAS output, kept across processes and shared between them.

Every cold `portfolio plan` and every new service worker would otherwise translate again, and translation is most
of a warm planning call. Content-addressed: `cache_key(domain_pddl, problem_pddl, version, options)` is a SHA-256
of the translator's version (`translator_version()`: the Fast Downward wheel's, and a hash of
`portfolio/delegates/fast_downward/translate.py`, the pipeline driving it), the exact PDDL texts and the translator
options, so an entry can only ever be the translator's answer for that input, and a new translator release or
pipeline change simply misses.

`SasCache(directory=None, max_bytes=DEFAULT_MAX_BYTES)` (256 MiB):
- `get(key)` -> `CachedTranslation` (the SAS text, whether the task was proved unsolvable) or None: missing,
  unreadable or corrupt (every entry carries the SHA-256 of its body in a header; a corrupt one is removed and
  the caller translates and rewrites it). A hit touches the entry.
- `put(key, entry)` writes atomically (a temporary file in the same directory moved into place with
  `os.replace`: concurrent workers see the old entry, the new one, or none), then `evict()`s the least recently
  used entries (by modification time) until the directory fits `max_bytes`. A cache that cannot be written is
  logged and skipped: it never fails a planning call.
- Entries live in a subdirectory of their own (`SUBDIRECTORY` under the directory given), and eviction only
  removes files named like an entry (64 hex digits + `.sas`) there, so `directory` may hold other files.

`default_cache_dir()`: `$XDG_CACHE_HOME/portfolio-planner`, else `~/.cache/portfolio-planner`. The CLI uses it
(`portfolio plan --cache-dir DIR` elsewhere, `--no-cache` off); the library only uses a cache it is given, so
embedding the planner never writes to a home directory unasked. Why these choices:
`docs/decisions/sas-cache.md`.

    cache = SasCache(tmp_dir)
    key = cache_key(domain_pddl, problem_pddl)
    entry = cache.get(key)
    if entry is None:
        result = translate(domain_pddl, problem_pddl)
        cache.put(key, CachedTranslation(result.sas, result.unsolvable))"""

from __future__ import annotations

import functools
import hashlib
import logging
import os
import re
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)

FORMAT = "portfolio-sas-cache 1"
SUFFIX = ".sas"
SUBDIRECTORY = "sas-1"  # the cache's own directory under the one given (the format's number: a new format moves)
_ENTRY = re.compile(r"[0-9a-f]{64}" + re.escape(SUFFIX))
DEFAULT_MAX_BYTES = 256 * 1024 * 1024


def default_cache_dir() -> Path:
    """`$XDG_CACHE_HOME/portfolio-planner`, or `~/.cache/portfolio-planner` when that is unset or empty."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "portfolio-planner"


@functools.lru_cache(maxsize=1)
def translator_version() -> str:
    """What the translator's output depends on besides its input: the Fast Downward wheel's version and the
    source of the pipeline that drives it (`portfolio/delegates/fast_downward/translate.py`), so a change to either
    misses the cache."""
    import importlib.metadata  # here: ~8 ms to import, which a planning call without the cache never needs

    try:
        wheel = importlib.metadata.version("up-fast-downward")
    except importlib.metadata.PackageNotFoundError:  # pragma: no cover - then there is no translator either
        wheel = "unknown"
    pipeline = Path(__file__).with_name("translate.py")
    try:
        source = hashlib.sha256(pipeline.read_bytes()).hexdigest()[:16]
    except OSError:  # pragma: no cover - an installation without it translates elsewhere
        source = "none"
    return f"up-fast-downward {wheel}; pipeline {source}"


def cache_key(domain_pddl: str, problem_pddl: str, version: str | None = None, options: Sequence[str] = ()) -> str:
    """The content address of one translation: SHA-256 over the translator version, both PDDL texts and the
    translator options (`portfolio.delegates.fast_downward.translate.check_options`; another option set is another
    translation)."""
    digest = hashlib.sha256()
    for part in (FORMAT, version or translator_version(), domain_pddl, problem_pddl, " ".join(options)):
        encoded = part.encode()
        digest.update(len(encoded).to_bytes(8, "big") + encoded)  # length-prefixed: no two inputs collide
    return digest.hexdigest()


@dataclass(frozen=True)
class CachedTranslation:
    sas: str
    unsolvable: bool


class SasCache:
    """The on-disk cache under `directory` (its own `sas-1/` there, created on first write), at most `max_bytes`
    of entries."""

    def __init__(self, directory: str | os.PathLike | None = None, max_bytes: int = DEFAULT_MAX_BYTES) -> None:
        if max_bytes <= 0:
            raise ValueError(f"max_bytes must be positive, got {max_bytes}")
        self.root = Path(directory) if directory is not None else default_cache_dir()
        self.directory = self.root / SUBDIRECTORY
        self.max_bytes = max_bytes
        self.hits = self.misses = self.corrupt = 0

    def path(self, key: str) -> Path:
        return self.directory / (key + SUFFIX)

    def get(self, key: str) -> CachedTranslation | None:
        """The entry for `key`, or None (missing, unreadable or corrupt: a corrupt entry is removed)."""
        path = self.path(key)
        try:
            data = path.read_bytes()
        except OSError:
            self.misses += 1
            return None
        entry = _decode(data)
        if entry is None:
            self.corrupt += 1
            log.warning("ignoring corrupt translation cache entry %s", path)
            _remove(path)
            return None
        try:
            os.utime(path)  # a hit makes the entry the most recently used
        except OSError:
            pass
        self.hits += 1
        return entry

    def put(self, key: str, entry: CachedTranslation) -> None:
        """Store atomically, then evict the least recently used entries beyond `max_bytes`. A cache that cannot
        be written (read-only, disk full) is logged and skipped: it must never fail a planning call."""
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            handle, temporary = tempfile.mkstemp(dir=self.directory, prefix=".tmp-", suffix=SUFFIX)
            try:
                with os.fdopen(handle, "wb") as out:
                    out.write(_encode(entry))
                os.replace(temporary, self.path(key))
            except BaseException:
                _remove(Path(temporary))
                raise
            self.evict()
        except OSError as error:
            log.warning("translation cache %s not written: %s", self.directory, error)

    def evict(self) -> None:
        """Remove the oldest entries (by modification time) until the rest fit in `max_bytes`. Only files
        named like an entry are counted or removed: anything else in the directory is not the cache's."""
        entries = []
        try:
            with os.scandir(self.directory) as scan:
                for item in scan:
                    if _ENTRY.fullmatch(item.name) and item.is_file(follow_symlinks=False):
                        try:
                            stat = item.stat()
                        except FileNotFoundError:  # removed by another process meanwhile
                            continue
                        entries.append((stat.st_mtime, stat.st_size, item.path))
        except FileNotFoundError:
            return
        total = sum(size for _, size, _ in entries)
        for _, size, path in sorted(entries):
            if total <= self.max_bytes:
                break
            _remove(Path(path))
            total -= size


def _encode(entry: CachedTranslation) -> bytes:
    body = entry.sas.encode()
    header = f"{FORMAT} {int(entry.unsolvable)} {hashlib.sha256(body).hexdigest()}\n".encode()
    return header + body


def _decode(data: bytes) -> CachedTranslation | None:
    header, newline, body = data.partition(b"\n")
    parts = header.decode(errors="replace").rsplit(" ", 2)
    if not newline or len(parts) != 3 or parts[0] != FORMAT or parts[1] not in ("0", "1"):
        return None
    if hashlib.sha256(body).hexdigest() != parts[2]:
        return None
    try:
        return CachedTranslation(sas=body.decode(), unsolvable=parts[1] == "1")
    except UnicodeDecodeError:
        return None


def _remove(path: Path) -> None:
    try:
        path.unlink()
    except OSError:
        pass
