from django.db import migrations, models


class Migration(migrations.Migration):
    """An item's kind of prompt (the bundle's prompt_kind), for the active design's prompt-kind
    model (issue 39)."""

    dependencies = [
        ('annotation', '0029_study_futility'),
    ]

    operations = [
        migrations.AddField(
            model_name='item',
            name='prompt_kind',
            field=models.CharField(blank=True, default='', help_text="the kind of prompt (the active design's prompt-kind model)", max_length=100),
        ),
    ]
