"""The logic study (README.md beside this file)."""
