"""Configuration: one frozen :class:`~rqueue.settings.config.Config`, resolved once.

- ``config``: arguments, then environment variables, then defaults.
- ``redis_url``: parsing, checking and redacting the Redis URL.

May import: ``errors`` and ``text``; nothing above them.
"""
