"""The induce seeds study (README.md beside this file)."""
