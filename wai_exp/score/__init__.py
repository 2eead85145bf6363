"""Scoring: pure functions over plain row dicts. No files, no HTTP, no MLflow here."""
