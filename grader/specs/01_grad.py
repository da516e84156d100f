"""Trusted probes for 01_grad: what the grader asks each solution, outside the notebook.

Each test cell's probes are evaluated in the student's namespace (inside the sandbox)
and in the instructor's (reference); the values are compared outside. See
grader/trusted.py. Inputs mirror the hidden tests of source/01_grad.
"""
from grader.trusted import Probe

_RNG = "import numpy as np\nimport jax\nimport jax.numpy as jnp\n_rng = np.random.default_rng({seed})\n"

PROBES = {
    "test_01_grad_scatter_add": [
        Probe("scatter_add(_x, _idx, _vals)", _RNG.format(seed=101) +
              "_x = jnp.asarray(_rng.normal(size=10), jnp.float32)\n"
              "_idx = jnp.asarray(_rng.integers(0, 10, size=25))\n"
              "_vals = jnp.asarray(_rng.normal(size=25), jnp.float32)\n",
              rtol=1e-5, atol=1e-5, section="1.2 Arrays are immutable: use .at[]",
              hint="repeated indices must accumulate (.set keeps only one)"),
    ],
    "test_01_grad_mse_grad": [
        Probe("mse_grad(_w, _x, _y)", _RNG.format(seed=102) +
              "_w = jnp.asarray(_rng.normal(size=5), jnp.float32)\n"
              "_x = jnp.asarray(_rng.normal(size=(20, 5)), jnp.float32)\n"
              "_y = jnp.asarray(_rng.normal(size=20), jnp.float32)\n",
              rtol=1e-4, atol=1e-5, section="2.3 The gradient of a loss"),
    ],
    "test_01_grad_loss_and_grad": [
        Probe("loss_and_grad(_p, _x, _y)", _RNG.format(seed=103) +
              "_p = {'w': jnp.asarray(_rng.normal(size=4), jnp.float32), 'b': jnp.float32(0.3)}\n"
              "_x = jnp.asarray(_rng.normal(size=(16, 4)), jnp.float32)\n"
              "_y = jnp.asarray(_rng.normal(size=16), jnp.float32)\n",
              rtol=1e-4, atol=1e-5, section="3.1 value_and_grad and has_aux",
              hint="the result is ((loss, preds), grads)"),
    ],
    "test_01_grad_param_and_input_grads": [
        Probe("param_and_input_grads(_p, _x, _y)", _RNG.format(seed=104) +
              "_p = {'w': jnp.asarray(_rng.normal(size=2), jnp.float32), 'b': jnp.float32(-0.7)}\n"
              "_x = jnp.asarray(_rng.normal(size=(6, 2)), jnp.float32)\n"
              "_y = jnp.asarray(_rng.normal(size=6), jnp.float32)\n",
              rtol=1e-4, atol=1e-5, section="3.2 Gradients with respect to a pytree",
              hint="argnums=(0, 1) gives (grads of params, grads of x)"),
    ],
    "test_01_grad_numerical_gradient": [
        Probe("numerical_gradient(_h, jnp.array([0.3, -1.2, 2.0]), 1e-2)",
              "import jax.numpy as jnp\n"
              "def _h(x):\n    return jnp.sum(jnp.sin(x) * x ** 2)\n",
              rtol=2e-3, atol=2e-3, section="4.1 Central differences"),
        Probe("_go()", _RNG.format(seed=105) +
              "def _q(x):\n"
              "    return jnp.sum(jnp.exp(0.5 * x) * jnp.cos(x)) + x[0] * x[-1]\n"
              "def _go():\n"
              "    with jax.enable_x64(True):\n"
              "        _x = jnp.asarray(_rng.normal(size=6), jnp.float64)\n"
              "        return numerical_gradient(_q, _x, 1e-4)\n",
              name="numerical_gradient(q, x, 1e-4) in float64",
              rtol=1e-6, atol=1e-6, dtype="exact", section="4.1 Central differences",
              hint="a one-sided difference, a wrong denominator, or perturbing every "
                   "coordinate at once"),
    ],
    "test_01_grad_jacobian": [
        Probe("jacobian(_f, jnp.array([0.5, -1.5, 0.25]))",
              "import jax.numpy as jnp\n"
              "def _f(x):\n"
              "    return jnp.stack([x[0] * x[1] * x[2], jnp.sin(x[1]), jnp.exp(x[2]) - x[0], x[0] ** 2])\n",
              rtol=1e-5, atol=1e-5, section="5.1 Vector outputs: jacfwd and jacrev",
              hint="the Jacobian's rows follow the outputs and its columns the inputs: (m, n)"),
    ],
    "test_01_grad_newton_step": [
        Probe("newton_step(_rosen, jnp.array([-1.2, 1.0, 0.8]))",
              "import jax.numpy as jnp\n"
              "def _rosen(x):\n"
              "    return jnp.sum(100.0 * (x[1:] - x[:-1] ** 2) ** 2 + (1 - x[:-1]) ** 2)\n",
              rtol=1e-3, atol=1e-3, section="5.2 Hessians and a Newton step"),
    ],
    "test_01_grad_td_loss": [
        Probe("td_loss(*_args)", _RNG.format(seed=108) +
              "_args = (jnp.asarray(_rng.normal(size=4), jnp.float32),\n"
              "         jnp.asarray(_rng.normal(size=(12, 4)), jnp.float32),\n"
              "         jnp.asarray(_rng.normal(size=12), jnp.float32),\n"
              "         jnp.asarray(_rng.normal(size=(12, 4)), jnp.float32), 0.95)\n",
              rtol=1e-4, atol=1e-5, section="6.1 stop_gradient"),
        Probe("jax.grad(td_loss)(*_args)", _RNG.format(seed=108) +
              "_args = (jnp.asarray(_rng.normal(size=4), jnp.float32),\n"
              "         jnp.asarray(_rng.normal(size=(12, 4)), jnp.float32),\n"
              "         jnp.asarray(_rng.normal(size=12), jnp.float32),\n"
              "         jnp.asarray(_rng.normal(size=(12, 4)), jnp.float32), 0.95)\n",
              name="jax.grad(td_loss)", rtol=1e-4, atol=1e-5, section="6.1 stop_gradient",
              hint="the gradient also flows through the target r + gamma * V(s_next)",
              fix="wrap the target in jax.lax.stop_gradient"),
    ],
    "test_01_grad_safe_norm": [
        Probe("safe_norm(_x)", _RNG.format(seed=109) +
              "_x = jnp.asarray(_rng.normal(size=(2, 3)), jnp.float32)\n",
              rtol=1e-5, section="6.2 NaN gradients through jnp.where"),
        Probe("jax.grad(safe_norm)(_x)", _RNG.format(seed=109) +
              "_x = jnp.asarray(_rng.normal(size=(2, 3)), jnp.float32)\n",
              name="jax.grad(safe_norm) away from 0", rtol=1e-4, atol=1e-5,
              section="6.2 NaN gradients through jnp.where"),
        Probe("jax.grad(safe_norm)(jnp.zeros((2, 3)))", "import jax\nimport jax.numpy as jnp\n",
              name="jax.grad(safe_norm) at x = 0", section="6.2 NaN gradients through jnp.where",
              hint="jnp.where differentiates both branches: sqrt'(0) is infinite and 0 * inf = NaN",
              fix="make the input of sqrt safe with a first jnp.where (the double where)"),
    ],
}
