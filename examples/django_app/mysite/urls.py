from django.contrib import admin
from django.urls import path
from shop import views

urlpatterns = [
    path("admin/", admin.site.urls),
    path("orders/", views.create_order),
    path("orders/<int:order_id>/", views.order_detail),
]
