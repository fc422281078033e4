"""What a task call becomes on the wire: msgpack, never pickle.

- ``payload``: :class:`Job` and its payload (fixed header, then the call).
- ``ranges``: the ranges of a task's options, checked at ``@task`` and when decoding.
- ``codec``: the extension types msgpack carries (datetimes, decimals, dataclasses,
  the types an application registers).

May import: ``errors``, ``text`` and ``timing``; nothing above them.
"""
