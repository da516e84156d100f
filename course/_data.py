"""Synthetic data sets made with JAX from explicit keys: no downloads."""
from __future__ import annotations


def regression_data(key, n: int = 64, d: int = 3, noise: float = 0.1):
    """A linear regression problem ``y = x @ w_true + b_true + noise``.

    Args:
      key: a typed PRNG key (``jax.random.key``).
      n: number of examples.
      d: number of features.
      noise: standard deviation of the Gaussian noise on ``y``.

    Returns:
      ``(x, y, (w_true, b_true))`` with shapes ``(n, d)``, ``(n,)``, ``((d,), ())``.

    >>> import jax
    >>> x, y, (w, b) = regression_data(jax.random.key(0), n=8, d=2)
    >>> x.shape, y.shape, w.shape
    ((8, 2), (8,), (2,))
    """
    import jax
    import jax.numpy as jnp

    kx, kw, kn = jax.random.split(key, 3)
    x = jax.random.normal(kx, (n, d))
    w_true = jnp.arange(1, d + 1, dtype=jnp.float32) * jnp.where(jnp.arange(d) % 2, -1.0, 1.0)
    b_true = jnp.float32(0.5)
    y = x @ w_true + b_true + noise * jax.random.normal(kn, (n,))
    del kw
    return x, y, (w_true, b_true)


def classification_data(key, n: int = 256, classes: int = 3, d: int = 2,
                        spread: float = 0.6):
    """Gaussian blobs, one per class, around points on a circle.

    Args:
      key: a typed PRNG key.
      n: number of examples.
      classes: number of classes.
      d: number of features (the first two carry the signal).
      spread: standard deviation of each blob.

    Returns:
      ``(x, labels)`` with shapes ``(n, d)`` float32 and ``(n,)`` int32.

    >>> import jax
    >>> x, labels = classification_data(jax.random.key(0), n=10)
    >>> x.shape, labels.shape, str(labels.dtype)
    ((10, 2), (10,), 'int32')
    """
    import jax
    import jax.numpy as jnp

    kl, kx = jax.random.split(key)
    labels = jax.random.randint(kl, (n,), 0, classes)
    angles = 2 * jnp.pi * labels / classes
    centres = jnp.zeros((n, d)).at[:, 0].set(2 * jnp.cos(angles)).at[:, 1].set(2 * jnp.sin(angles))
    x = centres + spread * jax.random.normal(kx, (n, d))
    return x, labels.astype(jnp.int32)
