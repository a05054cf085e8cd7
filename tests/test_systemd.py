"""The systemd units, sysusers.d and tmpfiles.d snippets in systemd/.

* ``systemd-analyze verify`` accepts every unit without a single message (unknown keys and
  bad values are only warnings there, so the test demands empty output). PID 1 need not be
  systemd. Commands that do not exist on this machine (``/usr/local/bin/kafkafs`` before
  installation) are pointed at ``true`` in a temporary copy.
* The properties the service needs, read from the unit files: Type=notify, a non-root
  user with CAP_SYS_ADMIN as its only capability and NoNewPrivileges=yes, /dev/fuse, ...
* No setting that puts the service into a mount namespace of its own: mounts made there
  do not propagate to the host, so the FUSE mount would be invisible outside the service
  (``test_namespace_mounts_do_not_reach_the_host`` shows the kernel side of this).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SYSTEMD = os.path.join(ROOT, "systemd")
SERVICE = os.path.join(SYSTEMD, "kafkafs.service")
TEMPLATE = os.path.join(SYSTEMD, "kafkafs@.service")
SYSUSERS = os.path.join(SYSTEMD, "kafkafs.sysusers")
TMPFILES = os.path.join(SYSTEMD, "kafkafs.tmpfiles")
PROPS = os.path.join(ROOT, "daemon", "server.properties")
UNITS = [SERVICE, TEMPLATE]

ANALYZE = shutil.which("systemd-analyze") or (
    "/usr/bin/systemd-analyze" if os.access("/usr/bin/systemd-analyze", os.X_OK) else None)
needs_analyze = pytest.mark.skipif(ANALYZE is None, reason="systemd-analyze is not installed")

EXEC_KEYS = ("ExecStartPre", "ExecStart", "ExecStartPost", "ExecReload", "ExecStop",
             "ExecStopPost", "ExecCondition")

# Settings that make systemd set up a mount namespace for the service
# (exec_needs_mount_namespace() in systemd's src/core): with any of them, a FUSE mount
# made by the daemon stays inside that namespace.
MOUNT_NAMESPACE_SETTINGS = (
    "ProtectSystem", "ProtectHome", "PrivateTmp", "PrivateDevices", "PrivateMounts",
    "PrivateNetwork", "NetworkNamespacePath", "PrivateIPC", "IPCNamespacePath",
    "ReadWritePaths", "ReadOnlyPaths", "InaccessiblePaths", "ExecPaths", "NoExecPaths",
    "BindPaths", "BindReadOnlyPaths", "TemporaryFileSystem", "MountImages",
    "ExtensionImages", "ExtensionDirectories", "RootDirectory", "RootImage",
    "ProtectKernelTunables", "ProtectKernelModules", "ProtectKernelLogs",
    "ProtectControlGroups", "ProtectProc", "ProcSubset", "LogNamespace", "DynamicUser",
    "PrivateUsers",  # a user namespace: CAP_SYS_ADMIN would no longer count for the host
)


def parse_unit(path: str) -> dict[str, dict[str, list[str]]]:
    """A unit file as section -> key -> [values] (keys may repeat; an empty assignment
    resets the list, as systemd does). Comments and continuation lines handled."""
    sections: dict[str, dict[str, list[str]]] = {}
    current = None
    with open(path, encoding="utf-8") as f:
        lines = f.read().splitlines()
    i = 0
    while i < len(lines):
        line = lines[i].strip()
        i += 1
        while line.endswith("\\") and i < len(lines):
            line = line[:-1] + " " + lines[i].strip()
            i += 1
        if not line or line[0] in "#;":
            continue
        m = re.match(r"^\[(.+)\]$", line)
        if m:
            current = sections.setdefault(m.group(1), {})
            continue
        assert current is not None, f"{path}: assignment outside a section: {line}"
        key, sep, value = line.partition("=")
        assert sep, f"{path}: not an assignment: {line}"
        key, value = key.strip(), value.strip()
        if value == "" and key not in ("Environment",):
            current[key] = []
        else:
            current.setdefault(key, []).append(value)
    return sections


def one(unit, section: str, key: str) -> str:
    values = unit.get(section, {}).get(key, [])
    assert len(values) == 1, f"[{section}] {key}= should be set exactly once, got {values}"
    return values[0]


def words(unit, section: str, key: str) -> set[str]:
    return {w for v in unit.get(section, {}).get(key, []) for w in v.split()}


def environment(unit) -> dict[str, str]:
    env = {}
    for value in unit["Service"].get("Environment", []):
        name, _, val = value.partition("=")
        env[name] = val
    return env


@pytest.fixture(params=UNITS, ids=os.path.basename)
def unit_path(request):
    return request.param


@pytest.fixture
def unit(unit_path):
    return parse_unit(unit_path)


# -- systemd-analyze verify ---------------------------------------------------------------

def _command_path(value: str) -> str:
    """The executable of an Exec*= value, without systemd's prefixes (-, +, !, @, :)."""
    return value.lstrip("-+!@:|").split(None, 1)[0]


def _runnable_copy(src: str, dest_dir: str) -> str:
    """Copy a unit into dest_dir, pointing commands that do not exist here at `true`."""
    true = shutil.which("true")
    out = []
    with open(src, encoding="utf-8") as f:
        for line in f.read().splitlines():
            key, sep, value = line.partition("=")
            if sep and key.strip() in EXEC_KEYS and value.strip():
                path = _command_path(value.strip())
                if not os.access(path, os.X_OK):
                    line = line.replace(path, true, 1)
            out.append(line)
    dest = os.path.join(dest_dir, os.path.basename(src))
    with open(dest, "w", encoding="utf-8") as f:
        f.write("\n".join(out) + "\n")
    return dest


def _verify(tmp_path, *names: str) -> str:
    env = dict(os.environ, SYSTEMD_LOG_COLOR="0", SYSTEMD_PAGER="", SYSTEMD_LOG_LOCATION="0")
    res = subprocess.run([ANALYZE, "verify", *names], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=60)
    return (res.stdout + res.stderr).strip()


@needs_analyze
def test_verify_units_without_messages(tmp_path):
    for src in UNITS:
        _runnable_copy(src, str(tmp_path))
    output = _verify(tmp_path, "./kafkafs.service", "./kafkafs@.service",
                     "./kafkafs@orders.service")
    assert output == "", f"systemd-analyze verify complained:\n{output}"


@needs_analyze
def test_verify_catches_mistakes(tmp_path):
    """The check above is not vacuous: verify reports an unknown key and a bad value."""
    dest = _runnable_copy(SERVICE, str(tmp_path))
    with open(dest, encoding="utf-8") as f:
        text = f.read()
    text = text.replace("[Service]\n", "[Service]\nNoSuchDirective=1\nRestrictRealtime=maybe\n")
    with open(os.path.join(tmp_path, "broken.service"), "w", encoding="utf-8") as f:
        f.write(text)
    output = _verify(tmp_path, "./broken.service")
    assert "NoSuchDirective" in output
    assert "maybe" in output


def _exposure(tmp_path, src: str) -> tuple[float, str]:
    """``systemd-analyze security --offline`` of a runnable copy of the unit ``src``: its
    overall exposure level and the report; skips where the offline mode is missing."""
    name = os.path.basename(src)
    _runnable_copy(src, str(tmp_path))
    env = dict(os.environ, SYSTEMD_LOG_COLOR="0", SYSTEMD_PAGER="", SYSTEMD_COLORS="0")
    res = subprocess.run([ANALYZE, "security", "--offline=true", f"./{name}"],
                         cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
    m = re.search(rf"Overall exposure level for {re.escape(name)}: ([0-9.]+)", res.stdout)
    if m is None:
        pytest.skip(f"systemd-analyze security --offline unsupported here: {res.stderr.strip()}")
    return float(m.group(1)), res.stdout


@needs_analyze
def test_security_exposure_is_ok(tmp_path):
    """`systemd-analyze security` rates the sandbox (offline: no running systemd needed)."""
    # 0 = fully sandboxed, 10 = not at all; without a mount namespace 3-4 is what is possible
    level, report = _exposure(tmp_path, SERVICE)
    assert level <= 4.0, report


# -- what the service needs ---------------------------------------------------------------

def test_notify_service(unit):
    assert one(unit, "Service", "Type") == "notify"
    assert one(unit, "Service", "NotifyAccess") == "main"


def test_restart_and_stop(unit):
    assert one(unit, "Service", "Restart") == "on-failure"
    assert one(unit, "Service", "KillSignal") == "SIGTERM"
    stop = one(unit, "Service", "TimeoutStopSec")
    assert re.fullmatch(r"\d+(s|min)?", stop)
    seconds = int(re.match(r"\d+", stop).group()) * (60 if stop.endswith("min") else 1)
    # kafkafs umount waits up to 60 s for the daemon to flush; leave room after that
    assert 60 < seconds <= 600


def test_exec_lines(unit, unit_path):
    start = one(unit, "Service", "ExecStart").split()
    assert start[0] == "/usr/local/bin/kafkafs" and start[1] == "mount"
    assert start[2] == "${KAFKAFS_MOUNTPOINT}"
    config = start[start.index("--config") + 1]
    if unit_path == TEMPLATE:
        assert config == "/etc/kafkafs/%i.properties"
    else:
        assert config == "/etc/kafkafs/server.properties"
    stop = one(unit, "Service", "ExecStop").split()
    assert stop[0].lstrip("-") == "/usr/local/bin/kafkafs"
    assert stop[1:] == ["umount", "${KAFKAFS_MOUNTPOINT}"]


def test_cli_accepts_the_exec_lines(unit):
    """`kafkafs mount` and `kafkafs umount` parse the arguments the unit passes."""
    try:
        from kafkafs.cli.main import build_parser

        parser = build_parser()
    except ImportError as exc:  # the CLI itself is broken: its own tests report that
        pytest.skip(f"kafkafs.cli not importable: {exc}")
    start = one(unit, "Service", "ExecStart").split()[1:]
    start = [a.replace("${KAFKAFS_MOUNTPOINT}", "/srv/x").replace("%i", "x") for a in start
             if a != "$KAFKAFS_ARGS"]
    args = parser.parse_args(start)
    assert args.command == "mount" and args.mountpoint == "/srv/x" and args.config
    stop = one(unit, "Service", "ExecStop").split()[1:]
    args = parser.parse_args([a.replace("${KAFKAFS_MOUNTPOINT}", "/srv/x") for a in stop])
    assert args.command == "umount" and args.mountpoint == "/srv/x"


def test_dedicated_user(unit):
    user = one(unit, "Service", "User")
    assert user == "kafkafs"
    assert user not in ("root", "0")
    assert one(unit, "Service", "Group") == "kafkafs"


def test_capabilities_and_no_new_privileges(unit):
    """libfuse mounts with mount(2) itself when it has CAP_SYS_ADMIN; fusermount3 (setuid)
    would not work under NoNewPrivileges=yes, which every seccomp setting implies anyway."""
    assert words(unit, "Service", "CapabilityBoundingSet") == {"CAP_SYS_ADMIN"}
    assert words(unit, "Service", "AmbientCapabilities") == {"CAP_SYS_ADMIN"}
    assert one(unit, "Service", "NoNewPrivileges") == "yes"


def test_fuse_device(unit):
    assert one(unit, "Service", "DevicePolicy") in ("closed", "strict")
    assert "/dev/fuse rw" in unit["Service"]["DeviceAllow"]


def test_seccomp_and_sockets(unit):
    filters = unit["Service"]["SystemCallFilter"]
    allow = filters[0].split()
    assert "@system-service" in allow and ("@mount" in allow or "mount" in allow)
    assert one(unit, "Service", "SystemCallArchitectures") == "native"
    assert words(unit, "Service", "RestrictAddressFamilies") == {"AF_UNIX"}  # sd_notify
    for key in ("RestrictNamespaces", "LockPersonality", "RestrictRealtime",
                "RestrictSUIDSGID"):
        assert one(unit, "Service", key) == "yes", key


def test_no_mount_namespace(unit):
    present = [k for k in MOUNT_NAMESPACE_SETTINGS if unit["Service"].get(k)]
    assert not present, (
        f"{present} would run the daemon in a mount namespace of its own: its FUSE mount "
        "would not be visible outside the service")
    assert unit["Service"].get("MountFlags", ["shared"]) == ["shared"]


def test_paths_agree_with_tmpfiles_and_properties(unit, unit_path):
    env = environment(unit)
    mountpoint = env["KAFKAFS_MOUNTPOINT"]
    with open(TMPFILES, encoding="utf-8") as f:
        tmpfiles = [line.split() for line in f if line.strip() and not line.startswith("#")]
    dirs = {fields[1]: fields for fields in tmpfiles if fields[0] == "d"}
    with open(PROPS, encoding="utf-8") as f:
        props = dict(re.findall(r"^([a-z][a-z0-9.]*)=(.*)$", f.read(), re.MULTILINE))
    if unit_path == SERVICE:
        assert mountpoint == props["kafkafs.mount.point"] == "/srv/kafkafs"
        assert dirs[mountpoint][3] == "kafkafs"
        assert one(unit, "Service", "EnvironmentFile") == "-/etc/default/kafkafs"
    else:
        assert mountpoint == "/srv/kafkafs-%i"
        assert one(unit, "Service", "EnvironmentFile") == "-/etc/default/kafkafs-%i"
    assert props["log.dirs"] in dirs and dirs[props["log.dirs"]][3] == "kafkafs"
    assert "/var/lib/kafkafs" in unit["Unit"]["RequiresMountsFor"]


def test_template_instance_is_a_config_name():
    unit = parse_unit(TEMPLATE)
    assert "/etc/kafkafs/%i.properties" in one(unit, "Unit", "AssertPathExists")
    # no DefaultInstance: `kafkafs@server` would fight kafkafs.service for the same log dir
    assert "DefaultInstance" not in unit.get("Install", {})


def test_installed_for_boot(unit):
    assert "multi-user.target" in words(unit, "Install", "WantedBy")


# -- the documented alternative without CAP_SYS_ADMIN --------------------------------------

# Settings after which systemd sets NoNewPrivileges=yes by itself for a service without
# CAP_SYS_ADMIN (they install seccomp filters): with any left, setuid fusermount3 fails.
NNP_IMPLYING = (
    "SystemCallFilter", "SystemCallArchitectures", "RestrictAddressFamilies",
    "RestrictNamespaces", "LockPersonality", "MemoryDenyWriteExecute", "RestrictRealtime",
    "RestrictSUIDSGID", "ProtectClock", "ProtectHostname", "ProtectKernelTunables",
    "ProtectKernelModules", "ProtectKernelLogs", "PrivateDevices", "DynamicUser",
)


def _documented_dropin() -> str:
    with open(os.path.join(ROOT, "docs", "systemd.md"), encoding="utf-8") as f:
        text = f.read()
    blocks = re.findall(r"```ini\n(.*?)```", text, re.DOTALL)
    found = [b for b in blocks if "no-capabilities.conf" in b]
    assert len(found) == 1, "docs/systemd.md: the no-capabilities drop-in is missing"
    return found[0]


def test_documented_no_capability_dropin(tmp_path):
    dropin_dir = tmp_path / "kafkafs.service.d"
    dropin_dir.mkdir()
    (dropin_dir / "no-capabilities.conf").write_text(_documented_dropin())
    base = parse_unit(SERVICE)["Service"]
    dropin = parse_unit(str(dropin_dir / "no-capabilities.conf"))["Service"]
    effective = {**base, **dropin}  # every key in the drop-in resets or replaces
    assert effective["NoNewPrivileges"] == ["no"]
    assert effective["AmbientCapabilities"] == []
    assert effective["CapabilityBoundingSet"] == ["CAP_SYS_ADMIN"]  # fusermount3 needs it
    left = [k for k in NNP_IMPLYING if effective.get(k) not in (None, [], ["no"])]
    assert not left, f"{left} would still imply NoNewPrivileges=yes"
    if ANALYZE is not None:
        _runnable_copy(SERVICE, str(tmp_path))
        output = _verify(tmp_path, "./kafkafs.service")
        assert output == "", f"systemd-analyze verify complained:\n{output}"


# -- sysusers.d and tmpfiles.d -------------------------------------------------------------

def _tool(name):
    path = shutil.which(name)
    if path is None:
        pytest.skip(f"{name} is not installed")
    return path


def test_sysusers_creates_system_user(tmp_path):
    tool = _tool("systemd-sysusers")
    (tmp_path / "etc").mkdir()
    with open(SYSUSERS, "rb") as f:
        res = subprocess.run([tool, f"--root={tmp_path}", "-"], stdin=f, capture_output=True,
                             text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    passwd = (tmp_path / "etc" / "passwd").read_text().splitlines()
    entry = [line.split(":") for line in passwd if line.startswith("kafkafs:")]
    assert len(entry) == 1
    _name, _pw, uid, gid, _gecos, home, shell = entry[0]
    assert 0 < int(uid) < 1000 and int(gid) > 0  # a system user
    assert home == "/var/lib/kafkafs"
    assert shell.endswith("nologin")
    assert any(line.startswith("kafkafs:") for line in
               (tmp_path / "etc" / "group").read_text().splitlines())


def test_tmpfiles_creates_directories(tmp_path):
    sysusers, tmpfiles = _tool("systemd-sysusers"), _tool("systemd-tmpfiles")
    (tmp_path / "etc").mkdir()
    with open(SYSUSERS, "rb") as f:
        subprocess.run([sysusers, f"--root={tmp_path}", "-"], stdin=f, check=True,
                       capture_output=True, timeout=60)
    with open(TMPFILES, "rb") as f:
        res = subprocess.run([tmpfiles, f"--root={tmp_path}", "--create", "-"], stdin=f,
                             capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    uid = int([line for line in (tmp_path / "etc" / "passwd").read_text().splitlines()
               if line.startswith("kafkafs:")][0].split(":")[2])
    for rel, mode in (("var/lib/kafkafs", 0o750), ("var/lib/kafkafs/logs", 0o750),
                      ("srv/kafkafs", 0o755), ("etc/kafkafs", 0o755)):
        st = os.stat(tmp_path / rel)
        assert st.st_mode & 0o7777 == mode, rel
        if os.geteuid() == 0:  # only root can give files away
            assert st.st_uid == (0 if rel.startswith("etc") else uid), rel


# -- why no mount namespace: the kernel side -----------------------------------------------

def test_namespace_mounts_do_not_reach_the_host(tmp_path):
    """What systemd does for ProtectSystem= & co. (unshare the mount namespace, make / a
    slave, build the sandbox, make it shared again) keeps every later mount inside: here a
    tmpfs stands in for the FUSE mount. The control run without the slave step shows the
    same mount reaching the host through a shared mount."""
    unshare, mount = shutil.which("unshare"), shutil.which("mount")
    if os.geteuid() != 0 or not unshare or not mount:
        pytest.skip("needs root, unshare(1) and mount(8)")
    shared = tmp_path / "shared"
    shared.mkdir()
    if subprocess.run([mount, "-t", "tmpfs", "tmpfs", str(shared)],
                      capture_output=True).returncode != 0:
        pytest.skip("cannot mount here")
    try:
        subprocess.run([mount, "--make-shared", str(shared)], check=True)
        target = shared / "mnt"
        target.mkdir()

        def host_sees_mount_made_inside(setup: str) -> bool:
            """Mount in a new mount namespace (after `setup`) and look, from inside, at
            the mount table of this process's (the host's) namespace."""
            script = (f"{setup} mount -t tmpfs inner {target}; "
                      f"grep -c ' {target} ' /proc/{os.getpid()}/mountinfo || true")
            res = subprocess.run([unshare, "-m", "--propagation", "unchanged", "sh", "-ec",
                                  script], capture_output=True, text=True, timeout=30)
            assert res.returncode == 0, res.stderr
            return int(res.stdout.split()[-1]) > 0

        systemd_style = f"mount --make-rslave {shared}; mount --make-rshared {shared};"
        assert not host_sees_mount_made_inside(systemd_style), \
            "a mount made in a systemd-style namespace reached the host"
        assert host_sees_mount_made_inside(""), "control: a shared peer should propagate"
        subprocess.run(["umount", str(target)], check=True)
    finally:
        subprocess.run(["umount", "-R", str(shared)], capture_output=True)


# -- kafkafs-serve.service: the listener without a mount ---------------------------------

SERVE = os.path.join(SYSTEMD, "kafkafs-serve.service")


@needs_analyze
def test_serve_unit_verifies_without_messages(tmp_path):
    _runnable_copy(SERVE, str(tmp_path))
    output = _verify(tmp_path, "./kafkafs-serve.service")
    assert output == "", f"systemd-analyze verify complained:\n{output}"


@needs_analyze
def test_serve_unit_is_sandboxed_further(tmp_path):
    """No mount to share with the host: a mount namespace and no capability, so systemd
    rates it better than the mount's unit."""
    level, report = _exposure(tmp_path, SERVE)
    assert level <= 3.0, report


def test_serve_unit():
    unit = parse_unit(SERVE)
    assert one(unit, "Service", "Type") == "notify"
    assert one(unit, "Service", "User") == "kafkafs"
    assert unit["Service"].get("CapabilityBoundingSet") == []  # none at all
    assert "AmbientCapabilities" not in unit["Service"]
    assert words(unit, "Service", "RestrictAddressFamilies") >= {"AF_INET", "AF_UNIX"}
    assert one(unit, "Service", "IPAddressAllow") == "localhost"  # as the default listener
    assert one(unit, "Service", "ProtectSystem") == "strict"
    assert "/var/lib/kafkafs" in words(unit, "Service", "ReadWritePaths")
    from kafkafs.cli.main import build_parser

    start = [a for a in one(unit, "Service", "ExecStart").split()[1:] if a != "$KAFKAFS_ARGS"]
    args = build_parser().parse_args(start)
    assert args.command == "serve" and args.config == "/etc/kafkafs/server.properties"
