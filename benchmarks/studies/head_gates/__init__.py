"""The head gates study (README.md beside this file)."""
