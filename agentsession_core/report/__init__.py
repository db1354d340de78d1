"""The report: report.html (page.py and its sections) and history.html (history_page.py),
each one self-contained page drawn from stored files alone. The report reads runs through
output/ and never judges: verdicts, comparisons and change points arrive as data."""
