"""The out of domain study (README.md beside this file)."""
