"""The shop's tasks: found by a worker started with ``-A rqueue.contrib.django``."""

from rqueue import task
from shop.models import Order


@task(tries=3, backoff=[1, 5])
def confirm_order(order_id: int) -> str:
    # Dispatched on commit: the row is always there when this runs.
    order = Order.objects.get(pk=order_id)
    order.status = "confirmed"
    order.save(update_fields=["status"])
    return order.status
