"""xtts_bench: side-by-side measurements of the xtts packages against the pipelines they replace."""

__all__: list[str] = []
