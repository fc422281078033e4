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

_USERINFO = re.compile(r"(?i)([a-z][a-z0-9+.\-]*://)([^\s/?#]*)@")
"""``scheme://user:password@`` (the password may itself hold ``@``: the last one ends it)."""
_PASSWORD_PARAM = re.compile(r"(?i)([?&;\s][a-z0-9_.\-]*pass(?:word)?=)[^&#\s]*")
"""``?password=...``, ``&ssl_password=...``, and ``password=`` anywhere in free text."""


def redact(text: str) -> str:
    """``text`` with every credential in it masked as ``***``.

    A URL's userinfo keeps only its user name (``redis://user:***@host``); userinfo
    without a colon is masked whole, since people put a bare password there too.
    Any ``...password=`` parameter (``redis://host/0?password=``, ``unix://...?password=``)
    loses its value. Applied to whole messages, so a URL quoted inside an error of
    redis-py or of a task is caught as well.
    """
    if "@" in text:
        text = _USERINFO.sub(_masked_userinfo, text)
    if "pass" in text.lower():
        text = _PASSWORD_PARAM.sub(r"\1***", " " + text)[1:]
    return text


def _masked_userinfo(match: re.Match[str]) -> str:
    scheme, userinfo = match.group(1), match.group(2)
    user, colon, _ = userinfo.partition(":")
    return f"{scheme}{user}:***@" if colon else f"{scheme}***@"


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
