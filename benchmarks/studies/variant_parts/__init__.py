"""The variant parts study (README.md beside this file)."""
