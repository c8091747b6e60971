"""The protocols study (README.md beside this file)."""
