# The study settings take their label, help, choices and bounds from the table of study settings
# (protocol/study_settings.py): no column changes (sqlmigrate: every operation a no-op).

import annotation.models
import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('annotation', '0020_active_resolved_to_resolution'),
    ]

    operations = [
        migrations.AlterField(
            model_name='study',
            name='allocation_policy',
            field=models.CharField(choices=[('adaptive', 'Adaptive'), ('paper', 'Paper (Algorithm 2)')], default='adaptive', error_messages={'invalid_choice': 'allocation_policy must be one of "adaptive", "paper", got %(value)r'}, help_text="adaptive: a pair stops when a decision has become unlikely (futile); paper: the paper's Algorithm 2", max_length=10, validators=[annotation.models.SettingBounds('allocation_policy')], verbose_name='allocation policy'),
        ),
        migrations.AlterField(
            model_name='study',
            name='batch_size',
            field=models.PositiveIntegerField(default=10, help_text='judgements per pair per round; a whole number at least 1 and at most 1000', validators=[annotation.models.SettingBounds('batch_size')], verbose_name='batch size'),
        ),
        migrations.AlterField(
            model_name='study',
            name='budget',
            field=models.PositiveIntegerField(default=0, help_text='human judgements the protocol may spend (never below what is spent and asked for); 0 at import: every comparison ratings_per_item times; a whole number at least 0 and at most 2147483647', validators=[annotation.models.SettingBounds('budget')], verbose_name='budget'),
        ),
        migrations.AlterField(
            model_name='study',
            name='check_every',
            field=models.PositiveIntegerField(default=0, help_text='about one HIT in N + 1 is a check, never two in a row; 0 = none (needs check lines in the bundle); a whole number at least 0 and at most 1000', validators=[annotation.models.SettingBounds('check_every')], verbose_name='a check every N comparisons'),
        ),
        migrations.AlterField(
            model_name='study',
            name='completion_code',
            field=models.CharField(blank=True, help_text='shown to crowd workers when their work is done; a text of at most 64 characters', max_length=64, validators=[annotation.models.SettingBounds('completion_code')], verbose_name='completion code'),
        ),
        migrations.AlterField(
            model_name='study',
            name='exclude_failed_checks',
            field=models.BooleanField(default=False, help_text='exclude workers flagged failed_checks', validators=[annotation.models.SettingBounds('exclude_failed_checks')], verbose_name='exclude workers who fail checks'),
        ),
        migrations.AlterField(
            model_name='study',
            name='exclude_low_agreement',
            field=models.BooleanField(default=False, help_text='exclude workers flagged low_agreement', validators=[annotation.models.SettingBounds('exclude_low_agreement')], verbose_name='exclude workers with low agreement'),
        ),
        migrations.AlterField(
            model_name='study',
            name='exclude_too_fast',
            field=models.BooleanField(default=False, help_text='exclude workers flagged too_fast', validators=[annotation.models.SettingBounds('exclude_too_fast')], verbose_name='exclude workers flagged too fast'),
        ),
        migrations.AlterField(
            model_name='study',
            name='family_control',
            field=models.CharField(choices=[('ebh', "e-BH (false discovery rate over the study's pairs)"), ('bonferroni', "Family-wise (any false ± over the study's pairs)"), ('none', 'None (each pair on its own)')], default='ebh', error_messages={'invalid_choice': 'family_control must be one of "ebh", "bonferroni", "none", got %(value)r'}, help_text="error control across the study's pairs (decision rule eprocess)", max_length=10, validators=[annotation.models.SettingBounds('family_control')], verbose_name='family control across pairs'),
        ),
        migrations.AlterField(
            model_name='study',
            name='gamma',
            field=models.FloatField(default=0.05, help_text='e.g. 0.05; smaller = more judgements per decision; a number above 0 and at most 0.5', validators=[annotation.models.SettingBounds('gamma')], verbose_name='γ (error level per decision)'),
        ),
        migrations.AlterField(
            model_name='study',
            name='instructions',
            field=models.TextField(blank=True, help_text='what annotators are asked, shown with every HIT; a text of at most 20000 characters', validators=[annotation.models.SettingBounds('instructions')], verbose_name='instructions'),
        ),
        migrations.AlterField(
            model_name='study',
            name='item_choice',
            field=models.CharField(choices=[('uniform', 'Uniform'), ('weighted', 'Separability-weighted'), ('stratified', 'Stratified by separability')], default='uniform', error_messages={'invalid_choice': 'item_choice must be one of "uniform", "weighted", "stratified", got %(value)r'}, help_text="how a pair's next item is drawn", max_length=10, validators=[annotation.models.SettingBounds('item_choice')], verbose_name='item choice'),
        ),
        migrations.AlterField(
            model_name='study',
            name='item_choice_temperature',
            field=models.FloatField(default=0.25, help_text="weighted choice: lower = stronger preference for separable items; a number at least 0.1 and at most 10, because temperatures below 0.1 make separability-weighted choice invalid for the decision: the least separable items' chance falls below e^-20 of the most separable's, so the error-controlled rule's inverse-probability steps vanish and the design weights rest on a handful of draws", validators=[annotation.models.SettingBounds('item_choice_temperature')], verbose_name='item choice temperature'),
        ),
        migrations.AlterField(
            model_name='study',
            name='lease_timeout_seconds',
            field=models.PositiveIntegerField(default=900, help_text='seconds an annotator keeps a HIT; a whole number at least 30 and at most 86400', validators=[annotation.models.SettingBounds('lease_timeout_seconds')], verbose_name='lease timeout (seconds)'),
        ),
        migrations.AlterField(
            model_name='study',
            name='metric',
            field=models.ForeignKey(blank=True, help_text="the metric whose labels the protocol combines with the human judgements; none: a human-only study; the name of one of the bundle's metrics (at most 200 characters)", null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to='annotation.metric', verbose_name='metric for the protocol'),
        ),
        migrations.AlterField(
            model_name='study',
            name='min_seconds_per_hit',
            field=models.PositiveIntegerField(default=0, help_text='seconds a HIT must be on screen before it can be answered (the server refuses faster answers); a whole number at least 0 and at most 3600', validators=[annotation.models.SettingBounds('min_seconds_per_hit')], verbose_name='minimum seconds per comparison'),
        ),
        migrations.AlterField(
            model_name='study',
            name='onboarding_checks',
            field=models.PositiveIntegerField(default=0, help_text="a worker's first HITs are this many checks; who fails them is thanked and not served more; a whole number at least 0 and at most 50", validators=[annotation.models.SettingBounds('onboarding_checks')], verbose_name='onboarding checks'),
        ),
        migrations.AlterField(
            model_name='study',
            name='pair_design',
            field=models.CharField(choices=[('all_pairs', 'All pairs (every pair decided)'), ('ranking', 'Ranking (a merge sort decides only the pairs it needs)'), ('active', 'Active ranking (labels where the fitted order is least sure)')], default='all_pairs', error_messages={'invalid_choice': 'pair_design must be one of "all_pairs", "ranking", "active", got %(value)r'}, help_text="all_pairs: every pair decided; ranking (many systems): a merge sort decides the pairs it needs (≤ k log₂ k), each at γ / C(k); active: labels where the fitted order is least sure, until it is resolved; both need family control 'none' (docs/ranking.md)", max_length=10, validators=[annotation.models.SettingBounds('pair_design')], verbose_name='pairs decided'),
        ),
        migrations.AlterField(
            model_name='study',
            name='prolific_study_id',
            field=models.CharField(blank=True, help_text="Prolific's STUDY_ID; a start link with another one is refused; a text of at most 64 characters", max_length=64, validators=[annotation.models.SettingBounds('prolific_study_id')], verbose_name='prolific study id'),
        ),
        migrations.AlterField(
            model_name='study',
            name='protocol_rule',
            field=models.CharField(choices=[('eprocess', 'Error-controlled (e-process)'), ('bayes', "Bayesian θ thresholds (the paper's rule)")], default='eprocess', error_messages={'invalid_choice': 'protocol_rule must be one of "eprocess", "bayes", got %(value)r'}, help_text="eprocess: false ± ≤ γ under any number of looks; bayes: the paper's θ thresholds, γ per look only", max_length=10, validators=[annotation.models.SettingBounds('protocol_rule')], verbose_name='decision rule'),
        ),
        migrations.AlterField(
            model_name='study',
            name='protocol_seed',
            field=models.PositiveIntegerField(default=0, help_text='seed of everything random in the protocol; a whole number at least 0 and at most 2147483647', validators=[annotation.models.SettingBounds('protocol_seed')], verbose_name='seed'),
        ),
        migrations.AlterField(
            model_name='study',
            name='protocol_strict',
            field=models.BooleanField(default=False, help_text='Pocock-adjusted level per look (decision rule bayes)', validators=[annotation.models.SettingBounds('protocol_strict')], verbose_name='strict'),
        ),
        migrations.AlterField(
            model_name='study',
            name='ranking_confidence',
            field=models.FloatField(default=0.95, help_text='active design: posterior probability at which two neighbours of the order count as ordered, or as close (misordered by no more than the resolution); a number at least 0.5 and below 1', validators=[annotation.models.SettingBounds('ranking_confidence')], verbose_name='confidence'),
        ),
        migrations.AlterField(
            model_name='study',
            name='ranking_max_labels',
            field=models.PositiveIntegerField(default=0, help_text='ranking designs: most judgements one pair may take, its resolution (a pair still undecided then is a tie); 0 = all of its items; a whole number at least 0 and at most 2147483647', validators=[annotation.models.SettingBounds('ranking_max_labels')], verbose_name='labels per comparison'),
        ),
        migrations.AlterField(
            model_name='study',
            name='ranking_resolution',
            field=models.FloatField(default=0.05, help_text='active design: the smallest difference of Bradley–Terry log-strengths the ranking must get right; two neighbours are resolved once a reversal larger than this is unlikely (0.05 is a 51.25 % win rate); a number at least 0 and at most 1, because 0 asks for every neighbour to be ordered (near-ties take every label they may), 1 already leaves reversals up to a 73 % win rate unresolved, and more would stop the design before it has ordered anything', validators=[annotation.models.SettingBounds('ranking_resolution')], verbose_name='resolution'),
        ),
        migrations.AlterField(
            model_name='study',
            name='ratings_per_item',
            field=models.PositiveIntegerField(default=1, help_text='judgements one comparison may receive; a whole number at least 1 and at most 100', validators=[annotation.models.SettingBounds('ratings_per_item')], verbose_name='ratings per item'),
        ),
        migrations.AlterField(
            model_name='study',
            name='repeat_every',
            field=models.PositiveIntegerField(default=0, help_text='about one HIT in N repeats a comparison the worker judged, sides swapped (repeat consistency); 0 = none; a whole number at least 0 and at most 1000', validators=[annotation.models.SettingBounds('repeat_every')], verbose_name='a repeat every N comparisons'),
        ),
        migrations.AlterField(
            model_name='study',
            name='separability_similarity',
            field=models.CharField(choices=[('rouge1', 'rouge1'), ('bleu', 'bleu'), ('token_jaccard', 'token_jaccard'), ('cosine', 'cosine'), ('length_adjusted_rouge1', 'length_adjusted_rouge1'), ('length_adjusted_bleu', 'length_adjusted_bleu'), ('length_adjusted_token_jaccard', 'length_adjusted_token_jaccard'), ('length_adjusted_cosine', 'length_adjusted_cosine')], default='rouge1', error_messages={'invalid_choice': 'separability_similarity must be one of "rouge1", "bleu", "token_jaccard", "cosine", "length_adjusted_rouge1", "length_adjusted_bleu", "length_adjusted_token_jaccard", "length_adjusted_cosine", got %(value)r'}, help_text='the text similarity separability is scored with at import (protocol/similarity.py; cosine needs requirements-embeddings.txt)', max_length=40, validators=[annotation.models.SettingBounds('separability_similarity')], verbose_name='separability similarity'),
        ),
        migrations.AlterField(
            model_name='study',
            name='session_hits_max',
            field=models.PositiveIntegerField(default=0, help_text='most judgements one worker is served; 0 = no limit, else at least session_hits_min; a whole number at least 0 and at most 100000', validators=[annotation.models.SettingBounds('session_hits_max')], verbose_name='most comparisons per worker'),
        ),
        migrations.AlterField(
            model_name='study',
            name='session_hits_min',
            field=models.PositiveIntegerField(default=1, help_text='judgements a worker needs for the completion code; a whole number at least 1 and at most 100000', validators=[annotation.models.SettingBounds('session_hits_min')], verbose_name='comparisons for the completion code'),
        ),
        migrations.AlterField(
            model_name='study',
            name='session_minutes',
            field=models.PositiveIntegerField(default=0, help_text="minutes from a worker's first HIT after which no new HIT is served; 0 = no limit; a whole number at least 0 and at most 1440", validators=[annotation.models.SettingBounds('session_minutes')], verbose_name='session time limit (minutes)'),
        ),
        migrations.AlterField(
            model_name='study',
            name='shown_sample',
            field=models.PositiveIntegerField(default=0, help_text='the output sample annotators see and ratings rate (outputs with several samples); a whole number at least 0 and at most 2147483647', validators=[annotation.models.SettingBounds('shown_sample')], verbose_name='shown sample'),
        ),
        migrations.AlterField(
            model_name='study',
            name='status',
            field=models.CharField(choices=[('draft', 'Draft'), ('running', 'Running'), ('paused', 'Paused'), ('finished', 'Finished')], default='running', error_messages={'invalid_choice': 'status must be one of "running", "paused", "finished", got %(value)r'}, max_length=10),
        ),
        migrations.AlterField(
            model_name='study',
            name='text_format',
            field=models.CharField(choices=[('plain', 'Plain text'), ('markdown', 'Markdown')], default='plain', error_messages={'invalid_choice': 'text_format must be one of "plain", "markdown", got %(value)r'}, help_text='how inputs and outputs are shown (annotation/rendering.py)', max_length=10, validators=[annotation.models.SettingBounds('text_format')], verbose_name='text format'),
        ),
    ]
