"""Figures of finished runs: summary maths, the metric registry, steady state, recall,
compare, sizing answers and SLOs — pure pandas/numpy, so notebooks call the same
functions as the CLI. Presenting them (tables, plots, reports) is `simulator.report`.
"""
