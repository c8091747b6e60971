"""The heads study (README.md beside this file)."""
