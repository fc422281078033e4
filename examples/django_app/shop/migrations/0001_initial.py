from django.db import migrations, models


class Migration(migrations.Migration):
    initial = True

    dependencies = []  # noqa: RUF012 (Django's own migration attributes)

    operations = [  # noqa: RUF012
        migrations.CreateModel(
            name="Order",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, verbose_name="ID")),
                ("item", models.CharField(max_length=100)),
                ("status", models.CharField(default="new", max_length=20)),
            ],
        ),
    ]
