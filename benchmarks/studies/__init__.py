"""The studies, one folder each: its README (what it measures, the commands that rerun it), its script
and the records that belong to it alone."""
