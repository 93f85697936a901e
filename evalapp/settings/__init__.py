"""Settings modules: base (shared), dev (embedded default), test, prod.

Choose one with DJANGO_SETTINGS_MODULE; manage.py defaults to evalapp.settings.dev.
Every deployment-specific value comes from the environment (docs/deployment.md, "Configuration").
"""
