"""Whether text from the LLM endpoint holds the API key, in any encoding text carries a secret in; the text
without it.

The key goes to the endpoint in the Authorization header (`portfolio.delegates.llm_client`), and what comes back
can repeat it: an endpoint that echoes the request's headers in an error body, or a model talked into it by text
in the task. That text reaches critiques, reasons, logs, the service's answers and the trace store, so it is
screened for the key written any of these ways:

- as it is, in any letter case;
- JSON-escaped (`\\/` for `/`, `\\u0041` for any character);
- URL-encoded (`quote` or `quote_plus`; `%2f` or `%2F`), also inside JSON escapes, or the other way round, and
  JSON-escaped twice (a JSON string inside a JSON string);
- hex, in either case;
- base64, standard or URL-safe: the key encoded alone, or inside a longer encoded string at any of the three
  byte alignments (what is searched for is the run of characters that depend on the key's bytes alone; the one
  or two at each end also carry the neighbours' bits).

`KeyScreen.found(text)` decodes the escapes and URL encodings (up to `LAYERS` deep, one inside another) and
looks for the key, its hex and its base64;
`KeyScreen.redact(text)` replaces every form it can locate in the text with `***`, and withholds the whole text
when the key is still found after that (a mix of encodings with no one span to cut out). A key shorter than
`MIN_SCREENED` characters is screened as it is only: its short encodings would turn up in ordinary text. Not
screened: a key the model split up, reversed or otherwise rewrote.
"""

from __future__ import annotations

import base64
import json
import re
from urllib.parse import quote, quote_plus, unquote_plus

REDACTED = "***"
LAYERS = 2  # escapes and encodings decoded one inside another
WITHHELD = "[withheld: the text repeats the API key in an encoding that cannot be cut out of it]"
MIN_SCREENED = 8

_ESCAPE = re.compile(r'\\(?:u([0-9a-fA-F]{4})|(["\\/bfnrt]))')
_SIMPLE = {'"': '"', "\\": "\\", "/": "/", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}
_URLSAFE = str.maketrans("+/", "-_")


def json_unescape(text: str) -> str:
    """`text` with JSON string escapes (`\\/`, `\\n`, `\\u0041`, ...) read; anything else left as it is."""
    if "\\" not in text:
        return text
    return _ESCAPE.sub(lambda m: chr(int(m[1], 16)) if m[1] else _SIMPLE[m[2]], text)


def url_unquote(text: str) -> str:
    """`text` URL-decoded (`%2F`, `+` for a space), or itself when it has nothing to decode."""
    return unquote_plus(text) if "%" in text or "+" in text else text


def base64_cores(secret: bytes) -> set[str]:
    """For each alignment of `secret` in a longer byte string (its offset mod 3) and both alphabets, the base64
    characters that depend on `secret`'s bytes alone: whatever surrounds it, its encoding holds one of them."""
    cores: set[str] = set()
    for shift in range(3):
        encoded = base64.b64encode(bytes(shift) + secret + bytes(3)).decode()
        # character j carries bits [6j, 6j + 6); the secret's bits are [8 shift, 8 (shift + len))
        core = encoded[-(-8 * shift // 6) : 8 * (shift + len(secret)) // 6]
        cores.update((core, core.translate(_URLSAFE)))
    return cores


class KeyScreen:
    """Finds and cuts the API `key` out of text (module docstring). Its repr never shows the key."""

    def __init__(self, key: str) -> None:
        forms = {key}
        self._cores: set[str] = set()
        if len(key) >= MIN_SCREENED:
            forms |= {key.replace("/", "\\/"), json.dumps(key)[1:-1], quote(key), quote(key, safe=""), quote_plus(key)}
            forms.add(key.encode().hex())
            self._cores = base64_cores(key.encode())
        self._lowered = {form.lower() for form in forms}  # found by substring search: faster than the pattern
        # longest first: a form that contains another is cut whole
        alternatives = "|".join(re.escape(form) for form in sorted(forms, key=len, reverse=True))
        self._pattern = re.compile(alternatives, re.IGNORECASE)

    def __repr__(self) -> str:
        return "KeyScreen(key=***)"

    def found(self, text: str) -> bool:
        """Whether `text` holds the key in any screened encoding, also under up to `LAYERS` layers of JSON
        escapes and URL encoding (a JSON string inside a JSON string, URL-encoded JSON, ...). Linear in the text
        (timings: `docs/benchmarks.md`, "The service under hostile clients")."""
        seen: set[str] = set()
        layer = [text]
        for depth in range(LAYERS + 1):
            fresh = [variant for variant in dict.fromkeys(layer) if variant not in seen]
            if any(self._holds(variant) for variant in fresh):
                return True
            seen.update(fresh)
            if depth < LAYERS:
                layer = [decoded for variant in fresh for decoded in (json_unescape(variant), url_unquote(variant))]
        return False

    def _holds(self, text: str) -> bool:
        lowered = text.lower()
        if any(form in lowered for form in self._lowered):
            return True
        if not self._cores:
            return False
        squeezed = "".join(text.split())  # base64 is often wrapped at 64 or 76 characters
        return any(core in squeezed for core in self._cores)

    def redact(self, text: str) -> str:
        """`text` with every form of the key it holds replaced by `***`; `WITHHELD` when the key is still in it."""
        text = self._pattern.sub(REDACTED, text)
        for core in self._cores:
            text = text.replace(core, REDACTED)
        return WITHHELD if self.found(text) else text
