"""Corpus ingest, feature cache and fixed-shape tf.data pipeline (not written yet)."""

__all__: list[str] = []
