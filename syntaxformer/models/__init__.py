"""Models: one file per model; the registry maps a ``--model`` name to its classes and presets."""
