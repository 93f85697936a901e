"""DRF serializers: shapes of the API's input and output, no logic."""
from rest_framework import serializers

from .models import Study


class StudySerializer(serializers.ModelSerializer):
    metric = serializers.CharField(source="metric.name", default=None, read_only=True)

    class Meta:
        model = Study
        fields = ["slug", "name", "criterion", "status", "gamma", "batch_size", "budget", "ratings_per_item",
                  "allocation_policy", "item_choice", "metric", "separability_status", "created_at"]


class StudyImportSerializer(serializers.Serializer):
    bundle = serializers.FileField()
    slug = serializers.SlugField(required=False, allow_blank=True)
    metric = serializers.CharField(required=False, allow_blank=True)


class PairSerializer(serializers.Serializer):
    first = serializers.CharField()
    second = serializers.CharField()
    status = serializers.CharField()
    decision = serializers.IntegerField()
    theta = serializers.FloatField(allow_null=True)
    round = serializers.IntegerField()
    judgements = serializers.IntegerField()
    capacity = serializers.IntegerField()
    favi = serializers.FloatField(allow_null=True)


class HitSerializer(serializers.Serializer):
    id = serializers.IntegerField(source="assignment.pk")
    item = serializers.CharField(source="item.external_id")
    input = serializers.CharField(source="item.input")
    left = serializers.CharField()
    right = serializers.CharField()
    expires_at = serializers.DateTimeField(source="assignment.expires_at")


class SubmitSerializer(serializers.Serializer):
    answer = serializers.ChoiceField(choices=["left", "tie", "right"])
    seconds_on_task = serializers.FloatField(required=False, min_value=0, max_value=86400)
