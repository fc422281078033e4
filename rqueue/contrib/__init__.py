"""Integrations with web frameworks: what a Django, FastAPI or Flask app needs beyond
rqueue's public API.

- ``django``: preloaded by a worker (``rqueue work -A rqueue.contrib.django``), it
  sets Django up and imports every installed app's ``tasks`` module before the
  children fork; ``dispatch_on_commit`` and ``after_commit`` queue a call once the
  transaction commits; ``staff_only`` lets only Django staff users through to an ASGI
  app (the dashboard).

FastAPI and Flask need nothing of their own (``dispatch_async``/``result_async`` and
``rqueue.web.create_app`` cover them): see docs/integrations.md and ``examples/``.

This folder sits at the top, beside the CLI and the dashboard: it may import rqueue's
public API and the frameworks it integrates, and nothing in rqueue imports it, so
rqueue never needs a web framework installed. Each module imports its framework at
its top: importing ``rqueue.contrib.django`` without Django installed is an
ImportError, as it should be.
"""
