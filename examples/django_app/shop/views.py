from django.db import transaction
from django.http import HttpRequest, JsonResponse
from django.shortcuts import get_object_or_404
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_GET, require_POST

from rqueue.contrib.django import dispatch_on_commit
from shop.models import Order
from shop.tasks import confirm_order


@csrf_exempt  # an API endpoint for the example's curl; keep CSRF on your forms
@require_POST
def create_order(request: HttpRequest) -> JsonResponse:
    with transaction.atomic():
        order = Order.objects.create(item=request.POST.get("item", "book"))
        dispatch_on_commit(confirm_order, order.id)  # queued once the row is committed
    return JsonResponse({"id": order.id, "status": order.status}, status=201)


@require_GET
def order_detail(request: HttpRequest, order_id: int) -> JsonResponse:
    order = get_object_or_404(Order, pk=order_id)
    return JsonResponse({"id": order.id, "status": order.status})
