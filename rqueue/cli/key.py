"""``rqueue key generate``: a new encryption key, as ``php artisan key:generate`` makes one.

It prints the key and nothing else, for ``RQUEUE_ENCRYPTION_KEYS`` (docs/security.md,
"Encrypted tasks"): 32 random bytes from the system's source, in URL-safe base64. It
needs no Redis and no ``cryptography``.
"""

from __future__ import annotations

import click

from rqueue.encoding.sealing import generate_key


@click.group()
def key() -> None:
    """Encryption keys for encrypted tasks (RQUEUE_ENCRYPTION_KEYS)."""


@key.command("generate")
def key_generate() -> None:
    """Print a new key. To rotate, put it first: RQUEUE_ENCRYPTION_KEYS=new,old."""
    click.echo(generate_key())
