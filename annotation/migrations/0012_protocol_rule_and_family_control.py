"""Error control by default (issue 19): the decision rule and family control become study
fields. Existing studies keep what they ran with (the paper's Bayesian rule, no family
control); new studies get the e-process rule with e-BH under the adaptive policy."""
import django.core.validators
from django.db import migrations, models

MIN_TEMPERATURE = 0.1  # annotation.models.MIN_ITEM_CHOICE_TEMPERATURE when this was written


def raise_low_temperatures(apps, schema_editor):
    """Weighted choice below the floor is refused from now on (the model, and the protocol's
    item choice): a study that had a lower temperature is served at the floor instead of failing."""
    apps.get_model("annotation", "Study").objects.filter(
        item_choice_temperature__lt=MIN_TEMPERATURE).update(item_choice_temperature=MIN_TEMPERATURE)


class Migration(migrations.Migration):

    dependencies = [
        ("annotation", "0011_harden_crowd_identity"),
    ]

    operations = [
        # Added with the old behaviour as the value of every existing row ...
        migrations.AddField(
            model_name="study",
            name="protocol_rule",
            field=models.CharField(default="bayes", max_length=10, verbose_name="decision rule",
                                   choices=[("eprocess", "Error-controlled (e-process)"),
                                            ("bayes", "Bayesian θ thresholds (the paper's rule)")]),
        ),
        migrations.AddField(
            model_name="study",
            name="family_control",
            field=models.CharField(default="none", max_length=10,
                                   choices=[("ebh", "e-BH (false discovery rate over the study's pairs)"),
                                            ("bonferroni", "Family-wise (any false ± over the study's pairs)"),
                                            ("none", "None (each pair on its own)")]),
        ),
        # ... then the error-controlled defaults for new rows.
        migrations.AlterField(
            model_name="study",
            name="protocol_rule",
            field=models.CharField(
                choices=[("eprocess", "Error-controlled (e-process)"),
                         ("bayes", "Bayesian θ thresholds (the paper's rule)")],
                default="eprocess",
                help_text="eprocess: false ± ≤ γ under any number of looks; bayes: the paper's θ thresholds, γ per look",
                max_length=10, verbose_name="decision rule"),
        ),
        migrations.AlterField(
            model_name="study",
            name="family_control",
            field=models.CharField(
                choices=[("ebh", "e-BH (false discovery rate over the study's pairs)"),
                         ("bonferroni", "Family-wise (any false ± over the study's pairs)"),
                         ("none", "None (each pair on its own)")],
                default="ebh", help_text="error control across the study's pairs (decision rule eprocess)",
                max_length=10),
        ),
        migrations.AlterField(
            model_name="study",
            name="allocation_policy",
            field=models.CharField(choices=[("paper", "Paper (Algorithm 2)"), ("adaptive", "Adaptive")],
                                   default="adaptive", max_length=10),
        ),
        migrations.AlterField(
            model_name="study",
            name="item_choice_temperature",
            field=models.FloatField(default=0.25, validators=[django.core.validators.MinValueValidator(
                0.1, message="the item choice temperature must be at least 0.1: temperatures below 0.1 make "
                             "separability-weighted choice invalid for the decision: the least separable items' "
                             "chance falls below e^-20 of the most separable's, so the error-controlled rule's "
                             "inverse-probability steps vanish and the design weights rest on a handful of "
                             "draws")]),
        ),
        migrations.RunPython(raise_low_temperatures, migrations.RunPython.noop),
    ]
