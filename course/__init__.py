"""Helpers that every course notebook imports: environment set-up and report,
run records, plotting and synthetic data.

The first cell of every notebook is::

    import course
    course.setup()

It configures JAX before any JAX operation runs (simulated CPU devices, typed PRNG
keys) and prints a report of the environment, so that every run of a notebook
records which versions and devices produced its numbers.
"""
from course._env import EnvironmentReport, environment_report, record_run, setup
from course._data import classification_data, regression_data
from course._plots import plot_contour_path, plot_curves, plot_timings

__all__ = [
    "EnvironmentReport",
    "classification_data",
    "environment_report",
    "plot_contour_path",
    "plot_curves",
    "plot_timings",
    "record_run",
    "regression_data",
    "setup",
]
