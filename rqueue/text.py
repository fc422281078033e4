"""Text fit to show: escaped for a terminal or a log line, with credentials redacted.

Task names, messages, hosts, tracebacks and queue names are read back from Redis,
where anyone with write access can put any bytes, and exception messages are written
by task code. Printed raw, an ANSI or OSC sequence in them moves the cursor, rewrites
the screen or sets the clipboard (OSC 52), and a newline or carriage return forges a
log line. So every sink (the CLI's output, text logs, process titles) passes what it
shows through :func:`shown`, here in one place, instead of each call escaping its own
fields. Layer 0: it imports nothing of rqueue's, so every part can use it.
"""

from __future__ import annotations

import re
from collections.abc import Container

_WORDS = re.compile(r"(\s+)")
_PASSWORD_OPTION = re.compile(r"(?i)(?:^|[?&;])[a-z0-9_.\-]*pass(?:word)?=")
"""``?password=``, ``&ssl_password=``, ``password=`` at the start of a word."""
_OPTION_NAME = re.compile(r"[A-Za-z0-9_.\-]*(?==)")


def redact(text: str) -> str:
    """``text`` with every credential in it masked as ``***``.

    Each word (run of non-space) is passed through :func:`mask_credentials`. Applied
    to whole messages, so a URL quoted inside an error of redis-py or of a task is
    caught as well.
    """
    if ("@" in text and "://" in text) or "pass" in text.lower():
        text = "".join(mask_credentials(word) for word in _WORDS.split(text))
    return text


def mask_credentials(word: str, options: Container[str] | None = None) -> str:
    """``word`` (a URL, or a word of free text) with anything that could be a
    password masked as ``***``, without parsing it as a URL.

    A password may hold any of ``/ ? # @ &`` unencoded (``redis://app:Q1w2/E3r4@host``),
    so no URL grammar can say where it ends. So: from the first ``://`` to the last
    ``@`` is userinfo, of which only a plain user name stays (``redis://user:***@host``;
    without a colon it is masked whole, since people put a bare password there too);
    a ``...password=`` option's value runs to the next ``&name=`` (with ``options``,
    only a name in them), so an ``&`` or ``#`` in it is masked too. Both spans are
    found first and masked together, so neither hides the other's end. Linear in
    ``word``: it may be a hostile record read from Redis.
    """
    spans = []
    start, end = word.find("://") + 3, word.rfind("@")
    if start > 2 and end >= start:
        user, colon, _ = word[start:end].partition(":")
        plain_user = colon and not any(c in user for c in "/?#")
        spans.append((start + len(user) + 1 if plain_user else start, end))
    for match in _PASSWORD_OPTION.finditer(word):
        amp = word.find("&", match.end())
        while amp >= 0:
            name = _OPTION_NAME.match(word, amp + 1)
            if name and (options is None or name.group() in options):
                break
            amp = word.find("&", amp + 1)
        spans.append((match.end(), amp if amp >= 0 else len(word)))
    if not spans:
        return word
    merged: list[tuple[int, int]] = []
    for left, right in sorted(spans):
        if merged and left <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], right))
        else:
            merged.append((left, right))
    shown, last = [], 0
    for left, right in merged:
        shown += [word[last:left], "***"]
        last = right
    return "".join([*shown, word[last:]])


def printable(text: str, multiline: bool = False) -> str:
    """``text`` with every character a terminal would act on written as an escape.

    Control characters (C0, DEL, C1: ESC starts every ANSI/OSC sequence, CR and LF
    end lines), bidi overrides, line separators and other non-printing characters
    become ``\\x1b``, ``\\n``, ``\\u202e``... as in Python's ``repr``. With ``multiline``
    (a traceback) its lines are kept, each indented by two spaces: only the caller
    writes at the start of a line, so no line inside can pass for one of its own.
    """
    if multiline:
        return "\n".join("  " + printable(line) for line in text.split("\n"))
    if text.isprintable():
        return text  # the common case costs one C-level scan
    return "".join(c if c.isprintable() else _escape(c) for c in text)


def _escape(char: str) -> str:
    code = ord(char)
    if char in "\n\r\t":
        return repr(char)[1:-1]
    if code <= 0xFF:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"


def shown(value: object, multiline: bool = False) -> str:
    """Anything as text that is safe to print: credentials redacted, then escaped."""
    return printable(redact(str(value)), multiline)
