"""The recipe search study (README.md beside this file)."""
