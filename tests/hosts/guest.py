"""A small Debian 12 guest for proving the grading sandbox on a real kernel (make test-hosts).

The guest is what a current course server runs: Linux 6.1 (linux-image-amd64), systemd
252 as init, the unified cgroup v2 hierarchy, bubblewrap, and two instructor accounts:
``instructor`` (uid 1000) with a lingering systemd user session, whose manager
delegates memory and pids, and ``teacher`` (uid 1001) with none.

- :func:`build` makes the image with ``mmdebstrap`` from Debian's mirror: a root
  filesystem (ext4, written by ``mke2fs -d``, no loop device) plus the kernel and
  initrd of linux-image-amd64, cached in ``<cache>/<recipe hash>/``. Any change to
  :data:`RECIPE` gives a new hash, so a new image; older ones are removed.
- :func:`boot` starts it with qemu, on KVM where it can (:func:`accelerator`), with
  2 vCPUs, 4 GiB, no network device, the root disk in snapshot mode (every boot
  starts from the same image), and three virtio-9p shares the kernel command line
  names (``hosts.share=TAG:PATH:ro|rw``): this
  repository and the Python it runs on, read-only at the same paths as here (so the
  venv works unchanged in the guest), and an output folder at ``/hosts``. The image's
  one service mounts them, runs ``/hosts/job.sh``, and powers the guest off.

The guest needs nothing of the repository at build time: only :data:`RECIPE` decides
the image. Where the tests run is decided by what the host writes to ``job.sh``
(tests/hosts/test_hosts.py runs tests/hosts/inside.py there).
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
INSTALL = "apt-get install mmdebstrap qemu-system-x86 e2fsprogs (and KVM for speed)"
MIRROR = "http://deb.debian.org/debian"
CPUS, MEMORY_MB = 2, 4096

# Mounts the shares named on the kernel command line, runs the host's job, powers off.
_BOOT = r"""#!/bin/sh
for arg in $(cat /proc/cmdline); do
  case "$arg" in
    hosts.share=*)
      spec=${arg#hosts.share=}; tag=${spec%%:*}; rest=${spec#*:}
      path=${rest%:*}; mode=${rest##*:}
      opts="trans=virtio,version=9p2000.L,msize=512000,$mode"
      [ "$mode" = ro ] && opts="$opts,cache=loose"
      mkdir -p "$path" && mount -t 9p -o "$opts" "$tag" "$path" ;;
  esac
done
if [ -f /hosts/job.sh ]; then
  sh /hosts/job.sh >/hosts/job.log 2>&1
  echo $? >/hosts/job.rc
fi
sync
systemctl poweroff --no-block
"""
_UNIT = """[Unit]
Description=Runs the host's job from /hosts (tests/hosts) and powers off
After=systemd-logind.service systemd-user-sessions.service user@1000.service
Wants=user@1000.service

[Service]
Type=oneshot
ExecStart=/usr/local/sbin/hosts-job
TimeoutStartSec=infinity

[Install]
WantedBy=multi-user.target
"""
RECIPE = {
    "suite": "bookworm",
    "mirror": MIRROR,
    "variant": "apt",
    "packages": sorted([
        "linux-image-amd64", "systemd", "systemd-sysv", "dbus", "dbus-user-session",
        "libpam-systemd", "bubblewrap", "util-linux", "procps", "kmod",
        # What the host's pyenv Python 3.12 and the venv's wheels link against.
        "libbz2-1.0", "libexpat1", "libffi8", "liblzma5", "libncursesw6", "libreadline8",
        "libsqlite3-0", "libssl3", "libstdc++6", "libtirpc3", "libuuid1", "zlib1g"]),
    # (uid, name, lingering user session): the instructors the levels run as.
    "users": [[1000, "instructor", True], [1001, "teacher", False]],
    "boot": _BOOT,
    "unit": _UNIT,
    "image_mb": 3072,
}


def recipe_hash() -> str:
    return hashlib.sha256(json.dumps(RECIPE, sort_keys=True).encode()).hexdigest()[:16]


def default_cache() -> Path:
    return Path(os.environ.get("JAXCOURSE_HOSTS_CACHE") or REPO / ".cache" / "hosts")


def accelerator() -> str:
    """``kvm`` where the host's KVM runs a stock kernel (VT-x or AMD-V), else ``tcg``.

    Some cloud VMs offer /dev/kvm through PVM (the ``kvm_pvm`` module), which runs
    only guests built for it: a stock Debian kernel hangs there right after its
    real-mode setup code. qemu's own emulator (TCG) boots it, 10-25 times slower.
    """
    hardware = any(Path(f"/sys/module/{m}").exists() for m in ("kvm_intel", "kvm_amd"))
    return "kvm" if hardware and os.access("/dev/kvm", os.R_OK | os.W_OK) else "tcg"


def missing(cache: Path | None = None) -> str | None:
    """One line saying what this machine lacks to build and boot the guest; None if nothing."""
    tools = ["qemu-system-x86_64"]
    if not (image_dir(cache or default_cache()) / "rootfs.img").exists():
        tools += ["mmdebstrap", "mkfs.ext4"]
        if os.geteuid() != 0:
            return "building the guest image needs root (mmdebstrap, chroot)"
    lacking = [t for t in tools if not shutil.which(t)]
    if lacking:
        return f"{', '.join(lacking)} not found: {INSTALL}"
    return None


def image_dir(cache: Path) -> Path:
    return cache / recipe_hash()


def _chroot(root: Path, *cmd: str) -> None:
    subprocess.run(["chroot", str(root), *cmd], check=True, stdin=subprocess.DEVNULL,
                   capture_output=True)


def _customize(root: Path) -> None:
    """What mmdebstrap does not: the job service, the users, a lingering session."""
    (root / "etc/hostname").write_text("hosts-guest\n")
    (root / "etc/fstab").write_text("/dev/vda / ext4 rw,errors=remount-ro 0 1\n")
    script = root / "usr/local/sbin/hosts-job"
    script.write_text(RECIPE["boot"])
    script.chmod(0o755)
    (root / "etc/systemd/system/hosts-job.service").write_text(RECIPE["unit"])
    _chroot(root, "systemctl", "enable", "hosts-job.service")
    _chroot(root, "systemctl", "mask", "apt-daily.timer", "apt-daily-upgrade.timer")
    # The host's Python is mounted under /root/.pyenv: the instructors must reach it.
    (root / "root").chmod(0o755)
    (root / "var/lib/systemd/linger").mkdir(parents=True, exist_ok=True)
    for uid, name, linger in RECIPE["users"]:
        _chroot(root, "useradd", "--create-home", "--uid", str(uid), "--shell", "/bin/sh", name)
        if linger:  # logind starts user@UID.service at boot, as `loginctl enable-linger`
            (root / "var/lib/systemd/linger" / name).touch()


def build(cache: Path | None = None, log=print) -> Path:
    """The image folder for :data:`RECIPE`, built first when missing (a few minutes)."""
    cache = cache or default_cache()
    target = image_dir(cache)
    if (target / "rootfs.img").exists():
        return target
    cache.mkdir(parents=True, exist_ok=True)
    work = cache / f"{target.name}.building"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir()
    root = work / "root"
    started = time.monotonic()
    log(f"building the guest image {target.name} (mmdebstrap, {RECIPE['suite']}) ...")
    with open(work / "build.log", "w") as out:
        subprocess.run(["mmdebstrap", f"--variant={RECIPE['variant']}", "--mode=root",
                        f"--include={','.join(RECIPE['packages'])}",
                        RECIPE["suite"], str(root), RECIPE["mirror"]],
                       check=True, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    _customize(root)
    kernels = sorted((root / "boot").glob("vmlinuz-*"))
    shutil.copy(kernels[-1], work / "vmlinuz")
    shutil.copy(root / "boot" / kernels[-1].name.replace("vmlinuz", "initrd.img"),
                work / "initrd.img")
    subprocess.run(["mkfs.ext4", "-q", "-F", "-L", "hosts-root", "-d", str(root),
                    str(work / "rootfs.img"), f"{RECIPE['image_mb']}M"], check=True,
                   capture_output=True)
    shutil.rmtree(root)
    (work / "recipe.json").write_text(json.dumps(RECIPE, indent=1, sort_keys=True))
    for old in cache.iterdir():  # images of older recipes
        if old.is_dir() and old != work:
            shutil.rmtree(old, ignore_errors=True)
    work.rename(target)
    log(f"built {target} in {time.monotonic() - started:.0f} s")
    return target


def shares() -> list[tuple[str, Path, str]]:
    """(tag, path, ro|rw) of the host folders the guest sees at the same paths."""
    found = [("repo", REPO, "ro"), ("python", Path(os.path.realpath(sys.base_prefix)), "ro")]
    venv = Path(sys.prefix).resolve()
    if not venv.is_relative_to(REPO):
        found.append(("venv", venv, "ro"))
    return found


def boot(image: Path, out: Path, job: str, timeout: float) -> subprocess.CompletedProcess:
    """Boots ``image`` once: ``job`` (a shell script) runs as root in the guest with
    ``out`` mounted at /hosts; returns when the guest has powered off.

    The console goes to ``out.parent / "console.log"``.
    """
    out.mkdir(parents=True, exist_ok=True)
    (out / "job.sh").write_text(job)
    append = ["root=/dev/vda", "rw", "console=ttyS0", "fsck.mode=skip", "hosts.share=out:/hosts:rw"]
    accel = ["-accel", "kvm", "-cpu", "host"] if accelerator() == "kvm" else \
        ["-accel", "tcg,thread=multi", "-cpu", "max"]  # max: AVX2, which jaxlib needs
    cmd = ["qemu-system-x86_64", *accel, "-smp", str(CPUS),
           "-m", str(MEMORY_MB), "-nodefaults", "-display", "none", "-no-reboot", "-nic", "none",
           "-kernel", str(image / "vmlinuz"), "-initrd", str(image / "initrd.img"),
           "-drive", f"file={image / 'rootfs.img'},if=virtio,format=raw,snapshot=on",
           "-serial", f"file:{out.parent / 'console.log'}",
           "-virtfs", f"local,path={out},mount_tag=out,security_model=none"]
    for tag, path, mode in shares():
        append.append(f"hosts.share={tag}:{path}:{mode}")
        cmd += ["-virtfs", f"local,path={path},mount_tag={tag},security_model=none,readonly=on"]
    cmd += ["-append", " ".join(append)]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                          stdin=subprocess.DEVNULL)
