"""Presenting results: terminal tables, plots, the HTML and Markdown reports of a run
and of a sweep or sizing folder. Computation lives in `analysis`; nothing here computes
a figure."""
