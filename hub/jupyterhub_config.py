"""JupyterHub configuration of the course: PAM accounts, one server per user, nbgrader.

`make hub` copies this file to HUB_PREFIX/hub/etc/ and writes hub.json beside it (the
class, the ports and the paths); a real deployment keeps this file as it is and writes
its own hub.json (docs/shared-server.md). What it sets up, in nbgrader's documented
way (docs: "Using nbgrader with JupyterHub"):

- every user logs in with their OS password (PAM) and gets a JupyterLab server running
  as their own account (the default LocalProcessSpawner; the hub runs as root);
- the course group ``nbgrader-<course>`` lists the students, the formgrader group
  ``formgrade-<course>`` the graders; nbgrader's JupyterHubAuthPlugin reads a user's
  groups through the hub's API to know their courses;
- a grader's server also reads ``etc/jupyter-graders`` (Formgrader, Create Assignment,
  Course List on); everyone reads ``etc/jupyter`` (the server-wide nbgrader config:
  exchange and course id; those three extensions off).
"""
import json
import os

c = get_config()  # noqa: F821 (provided by traitlets when JupyterHub loads this file)

with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "hub.json")) as f:
    hub = json.load(f)

course = hub["course_id"]
students, graders = hub["students"], hub["graders"]
students_group, graders_group = f"nbgrader-{course}", f"formgrade-{course}"

# --- Where it listens: the proxy on hub["ip"]:hub["port"] (127.0.0.1 for the demo; a
# real server puts TLS in front, or sets c.JupyterHub.ssl_cert/ssl_key), the hub and
# the proxy's API on the ports after it, loopback only.
c.JupyterHub.bind_url = f"http://{hub['ip']}:{hub['port']}"
c.JupyterHub.hub_bind_url = f"http://127.0.0.1:{hub['port'] + 1}"
c.ConfigurableHTTPProxy.api_url = f"http://127.0.0.1:{hub['port'] + 2}"
# configurable-http-proxy from npm (hub/package.json), started and stopped by the hub.
c.ConfigurableHTTPProxy.command = [hub["proxy"]]
c.ConfigurableHTTPProxy.pid_file = os.path.join(hub["state"], "proxy.pid")
c.JupyterHub.pid_file = os.path.join(hub["state"], "jupyterhub.pid")
c.JupyterHub.db_url = "sqlite:///" + os.path.join(hub["state"], "jupyterhub.sqlite")
c.JupyterHub.cookie_secret_file = os.path.join(hub["state"], "jupyterhub_cookie_secret")
# Stopping the hub stops every user's server and the proxy (make hub-clean relies on it).
c.JupyterHub.cleanup_servers = True
c.JupyterHub.cleanup_proxy = True

# --- Who logs in: OS accounts, by password (PAM), the class only.
c.JupyterHub.authenticator_class = "pam"
c.Authenticator.allowed_users = set(students) | set(graders)
c.Authenticator.admin_users = set(hub.get("admins", []))
c.JupyterHub.load_groups = {
    students_group: {"users": sorted(set(students) | set(graders))},
    graders_group: {"users": sorted(graders)},
}
# nbgrader's JupyterHubAuthPlugin reads the user's groups (GET /hub/api/users/NAME)
# with the server's token: the server role gets that scope on top of its defaults.
# (nbgrader's docs give the server role 'inherit', i.e. everything its user may do;
# this is the part nbgrader uses.)
c.JupyterHub.load_roles = [{
    "name": "server",
    "scopes": ["users:activity!user", "access:servers!server", "read:users:name!user",
               "read:users:groups!user"],
}]

# --- Each user's server: the course environment, run as the user, in their home.
env_bin = os.path.join(hub["env"], "bin")
c.Spawner.cmd = [os.path.join(env_bin, "jupyterhub-singleuser")]
c.Spawner.default_url = "/lab"
c.Spawner.notebook_dir = "~"
c.Spawner.environment = {
    # bwrap (the grading sandbox) and the course's `make` from /usr/bin.
    "PATH": f"{env_bin}:/usr/local/bin:/usr/bin:/bin",
    "JUPYTER_CONFIG_PATH": hub["jupyter_config"],
}
# A JAX kernel and JupyterLab start slowly on a small shared machine.
c.Spawner.start_timeout = 180
c.Spawner.http_timeout = 180
# Each user's own jupyter settings stay theirs; nothing else of the hub's env leaks in.
c.Spawner.env_keep = ["LANG", "LC_ALL"]


def _graders_config(spawner):
    """A member of the formgrader group gets the graders' config folder too (first: it wins).

    Group membership decides, as it is at spawn time (the admin page can change it).
    """
    if graders_group in {group.name for group in spawner.user.groups}:
        spawner.environment["JUPYTER_CONFIG_PATH"] = os.pathsep.join(
            [hub["jupyter_config_graders"], hub["jupyter_config"]])


c.Spawner.pre_spawn_hook = _graders_config
