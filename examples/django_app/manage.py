"""A Django project whose orders are confirmed by an rqueue task, after the commit.

Run it (from this folder, with rqueue[web] and Django installed, and a Redis at
REDIS_URL, e.g. ``rqueue server`` in another terminal)::

    export DJANGO_SETTINGS_MODULE=mysite.settings
    python manage.py migrate
    python manage.py createsuperuser                  # to see the dashboard
    uvicorn mysite.asgi:application --port 8000       # the site, and /rqueue/ for staff
    rqueue work -A rqueue.contrib.django default      # in another terminal: the worker

    curl -X POST -d item=book http://127.0.0.1:8000/orders/   # {"id": 1, "status": "new"}
    curl http://127.0.0.1:8000/orders/1/                      # {"id": 1, "status": "confirmed"}

Then log in at http://127.0.0.1:8000/admin/ and open http://127.0.0.1:8000/rqueue/.
``shop/views.py`` creates an order in a transaction and dispatches ``confirm_order``
with ``dispatch_on_commit``; ``shop/tasks.py`` is found by the worker because
``rqueue.contrib.django`` imports every installed app's ``tasks`` module.
tests/integration/recipes/test_recipes_django.py runs all of this.
"""

import os
import sys

if __name__ == "__main__":
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "mysite.settings")
    from django.core.management import execute_from_command_line

    execute_from_command_line(sys.argv)
