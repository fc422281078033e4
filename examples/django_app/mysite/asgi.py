"""The site, with rqueue's dashboard at /rqueue/ for staff users only.

``uvicorn mysite.asgi:application``: a Starlette router sends /rqueue/... to the
dashboard behind :func:`rqueue.contrib.django.staff_only`, everything else to Django.
"""

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "mysite.settings")
django_app = get_asgi_application()  # sets Django up: what follows may need it

from django.conf import settings  # noqa: E402
from starlette.routing import Mount, Router  # noqa: E402

from rqueue.contrib.django import staff_only  # noqa: E402
from rqueue.web import create_app  # noqa: E402

application = Router(
    routes=[
        Mount("/rqueue", app=staff_only(create_app(allowed_hosts=settings.ALLOWED_HOSTS))),
        Mount("/", app=django_app),
    ]
)
