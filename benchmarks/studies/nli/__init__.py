"""The nli study (README.md beside this file)."""
