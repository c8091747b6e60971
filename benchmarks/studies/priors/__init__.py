"""The priors study (README.md beside this file)."""
