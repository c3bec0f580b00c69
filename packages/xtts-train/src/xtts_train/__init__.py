"""XTTS-style text-to-mel model and static-signature trainer (not written yet)."""

__all__: list[str] = []
