"""The report stage: verdicts and records on disk -> decision table (Markdown), report.json and plots.

Pipeline position: the last stage. It reads what the sweep, the load runner and the judge wrote; it
decides nothing.
"""
