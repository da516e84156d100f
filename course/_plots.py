"""Plots the chapters share. Every plot is titled and its axes labelled."""
from __future__ import annotations

from typing import Callable, Mapping, Sequence


def _pyplot():
    import matplotlib.pyplot as plt

    return plt


def plot_contour_path(f: Callable, xlim=(-2.0, 2.0), ylim=(-2.0, 2.0), *, paths=None,
                      arrows=None, title: str = "", levels: int = 30, ax=None):
    """Contours of a function of two variables, with optional paths and arrows.

    Args:
      f: maps an array of shape ``(2,)`` to a scalar.
      xlim, ylim: the plotted window.
      paths: ``{label: array of shape (steps, 2)}``, e.g. gradient-descent iterates.
      arrows: ``(points, vectors)``, two arrays of shape ``(k, 2)``, drawn as a quiver
        (for instance the negative gradient at a few points).
      title: the plot's title.

    Returns:
      The matplotlib ``Axes``.
    """
    import jax
    import jax.numpy as jnp
    import numpy as np

    plt = _pyplot()
    if ax is None:
        _, ax = plt.subplots(figsize=(5.5, 4.5))
    xs = jnp.linspace(*xlim, 80)
    ys = jnp.linspace(*ylim, 80)
    gx, gy = jnp.meshgrid(xs, ys)
    z = jax.vmap(f)(jnp.stack([gx.ravel(), gy.ravel()], axis=1)).reshape(gx.shape)
    cs = ax.contourf(np.asarray(gx), np.asarray(gy), np.asarray(z), levels=levels, cmap="viridis")
    plt.colorbar(cs, ax=ax, label="f(x, y)")
    for label, path in (paths or {}).items():
        p = np.asarray(path)
        ax.plot(p[:, 0], p[:, 1], "o-", ms=3, lw=1.2, label=label)
    if arrows is not None:
        pts, vecs = (np.asarray(a) for a in arrows)
        ax.quiver(pts[:, 0], pts[:, 1], vecs[:, 0], vecs[:, 1], color="white",
                  angles="xy", scale_units="xy", scale=None, width=0.004)
    if paths:
        ax.legend(loc="upper right")
    ax.set(title=title or "f(x, y)", xlabel="x", ylabel="y")
    return ax


def plot_curves(curves: Mapping[str, Sequence[float]], *, title: str, xlabel: str,
                ylabel: str, logy: bool = False, ax=None):
    """Line plot of named curves, e.g. loss and accuracy per step."""
    import numpy as np

    plt = _pyplot()
    if ax is None:
        _, ax = plt.subplots(figsize=(6, 3.5))
    for label, ys in curves.items():
        ax.plot(np.arange(len(ys)), np.asarray(ys), label=label)
    if logy:
        ax.set_yscale("log")
    ax.set(title=title, xlabel=xlabel, ylabel=ylabel)
    ax.legend()
    return ax


def plot_timings(sizes: Sequence[int], timings: Mapping[str, Sequence[float]], *,
                 title: str, xlabel: str = "batch size", ylabel: str = "time per call (ms)",
                 ax=None):
    """Log-log plot of timings against problem size, one line per method."""
    import numpy as np

    plt = _pyplot()
    if ax is None:
        _, ax = plt.subplots(figsize=(6, 3.5))
    for label, ts in timings.items():
        ax.plot(np.asarray(sizes), np.asarray(ts), "o-", label=label)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set(title=title, xlabel=xlabel, ylabel=ylabel)
    ax.legend()
    return ax
