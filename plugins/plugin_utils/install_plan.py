# -*- coding: utf-8 -*-
# Copyright: blackwell.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the sglang_install role does on a node, decided in one place.

``plan`` turns the role's one read of the node (blackwell.sglang.sglang_venv_info) into the
settings and node problems that stop the host before anything is written, the named steps
with the reason the node is off in each, and what each step acts on; a node that is as the
role leaves it gets no steps. The role's settings arrive without their ``sglang_install_``
prefix, with the paths vars/main.yml derives from them; the paths the role manages arrive as
rows of one table (``files``, see plugin_utils/managed.py) with two columns of this role's
own: ``phase`` (where in the run the row is written: ``account``, ``venv``, ``uv``,
``request``, ``sources``, ``activate``) and ``installer`` (the row is in force only for that
installer). Pure Python, no Ansible imports: the filter sglang_install_plan calls it, the unit
tests too.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible_collections.blackwell.sglang.plugins.module_utils.dist_record import describe as record_off
from ansible_collections.blackwell.sglang.plugins.module_utils.nccl import version_finding
from ansible_collections.blackwell.sglang.plugins.plugin_utils import managed
from ansible_collections.blackwell.sglang.plugins.plugin_utils.releases import to_prune
from ansible_collections.blackwell.sglang.plugins.plugin_utils.requirements import at_least, pinned_hashes, pinned_line, pinned_version
from ansible_collections.blackwell.sglang.plugins.plugin_utils.settings import truthy

# In a check, a row whose directory is still to be made has nowhere to be compared: the step
# that makes the directory is what the check reports. The read tells which of them exist.
_PHASE_NEEDS = {"uv": "uv_venv_exists", "request": "venv_exists", "sources": "venv_exists",
                "activate": "venv_exists"}
# torch/version.py as torch's build writes it: `cuda: Optional[str] = '13.0'` (None on CPU builds).
_TORCH_CUDA = re.compile(r"(?m)^cuda(?:\s*:\s*[^=\n]+)?\s*=\s*['\"]([0-9.]+)['\"]")
# A wheelhouse on the node is trusted as far as who can write it: root's, not group- or
# world-writable, not a symbolic link (the read reports links as themselves).
_SAFE_MODE = re.compile(r"^[0-7][0-7][0145][0145]$")
# Written into the release's venv before its installer runs, removed once the install finished:
# a release that still has it was left by an install that did not finish (killed, rebooted).
PENDING = "blackwell-install-pending"


# The compute capability major whose GPUs need the NCCL floor: NCCL before 2.31.2 hits an illegal
# memory access there at all-reduce sizes of 512 KiB and above (NVIDIA/nccl#2418).
NCCL_FLOOR_MAJOR = 12


def nccl_overrides(policy, floor, package, no_deps, capability_majors, lock=""):
    """The override lines that lift torch's exact NCCL pin to at least FLOOR: on a node whose
    GPUs include compute capability 12 (POLICY ``auto``), on every node (``always``) or on none
    (``never``). None where the install takes no dependencies (NO_DEPS): the request is then
    installed as listed, and torch's pin is not resolved. With a LOCK the override is the lock's
    own line for PACKAGE, its hashes with it (uv's --require-hashes asks an exact pin with hashes
    of an override too); the plan refuses a lock without one at or above the floor."""
    wanted = {"always": True, "never": False}.get(str(policy))
    if wanted is None:
        wanted = NCCL_FLOOR_MAJOR in [int(major) for major in capability_majors or [] if str(major).isdigit()]
    if not wanted or truthy(no_deps):
        return []
    return [pinned_line(str(lock or ""), package) or "%s>=%s" % (package, floor)]


def pending_file(inputs):
    return inputs["release_dir"] + "/" + PENDING


def uv_hashes(inputs):
    """The hashes pip requires of uv's wheel: the setting's, else the lock's line for uv, else the
    collection's own for that uv release (vars/main.yml: every uv release it ships as default)."""
    if inputs["uv_sha256"]:
        return [str(digest).lower() for digest in inputs["uv_sha256"]]
    return (pinned_hashes(str(inputs["requirements_lock"] or ""), "uv", str(inputs["uv_version"]))
            or [str(digest).lower() for digest in (inputs.get("uv_known_sha256") or {}).get(str(inputs["uv_version"]), [])])


def _in_use(releases):
    """The releases a service runs from, or an unfinished rollout's record names."""
    return ([r["path"] + " (running)" for r in releases if r.get("running")]
            + [r["path"] + " (the rollback target)" for r in releases if r.get("rollback_target")])


def _content_off(row, paths):
    found = paths.get(row["path"]) or {}
    return (not found.get("exists") or found.get("islink") or found.get("isdir")
            or found.get("checksum") != row.get("checksum"))


def problems(probe, inputs):
    """What stops the host before anything is written, as clauses that each name their setting."""
    version = str(inputs["version"])
    lock = str(inputs["requirements_lock"] or "")
    keep = str(inputs["keep_releases"])
    found = []
    # The formats and bounds of the settings (the version, uv's digests, the releases kept) are the
    # settings table's (plugins/plugin_utils/settings.py), judged with them in the same refusal.
    if truthy(inputs["no_index"]) and not inputs["find_links"]:
        found.append("sglang_install_no_index is true but sglang_install_find_links is empty; nothing could be installed")
    if lock and not re.search(r"(?im)^\s*sglang(\[[^\]]*\])?\s*==\s*%s(\s|;|$)" % re.escape(version), lock):
        found.append("sglang_install_requirements_lock does not pin sglang==%s (sglang_install_version); lock that "
                     "release, with its hashes" % version)
    if lock and (inputs["extras"] or inputs["extra_packages"]):
        found.append("sglang_install_requirements_lock replaces the requirements the role composes: put the extras "
                     "and sglang_install_extra_packages into the lock, with their hashes, and leave both empty")
    if inputs["installer"] == "uv" and not uv_hashes(inputs):
        found.append("sglang_install_uv_version %s has no wheel hash in the collection, and uv is never installed "
                     "unchecked (it runs as root at every install): set sglang_install_uv_sha256 to its wheels' sha256, "
                     "or pin uv==%s with its hashes in sglang_install_requirements_lock"
                     % (inputs["uv_version"], inputs["uv_version"]))
    found += _nccl_problems(inputs)
    in_use = _in_use(probe.get("releases") or [])
    if keep == "1" and in_use:
        found.append("sglang_install_keep_releases must be at least 2 while a service uses these releases (%s): a "
                     "rollback needs the release it goes back to beside the one installed" % ", ".join(in_use))
    dists = probe.get("sglang_dist_infos") or []
    if len(dists) > 1:
        found.append("%s holds several SGLang distributions (%s); remove that release's directory and run again"
                     % (inputs["release_dir"], ", ".join(sorted(d.rstrip("/").rsplit("/", 1)[-1] for d in dists))))
    if not (probe.get("python") or {}).get("executable"):
        found.append("sglang_install_python %s is not an executable on this host" % inputs["python"])
    paths = probe.get("paths") or {}
    active = paths.get(inputs["venv"]) or {}
    if active.get("exists") and not active.get("islink"):
        found.append("%s (sglang_install_venv) is not a symbolic link: it must be the link to the active release under "
                     "%s. Move it away (or remove it) and run again, or set sglang_install_venv to another path"
                     % (inputs["venv"], inputs["releases_dir"]))
    unsafe = [path for path in inputs["find_links_local"] if (paths.get(path) or {}).get("exists")
              and (paths[path].get("islink") or paths[path].get("owner") != "root"
                   or not _SAFE_MODE.match(str(paths[path].get("mode"))))]
    if unsafe:
        found.append("sglang_install_find_links: %s on this node can be written by others than root (its owner, a "
                     "group- or world-writable mode, or a symbolic link): whoever writes there chooses the wheels the "
                     "install takes; make each a directory of root's that is not group- or world-writable"
                     % ", ".join(unsafe))
    return found


def _nccl_problems(inputs):
    """Where the NCCL floor applies: pip has no overrides, and a lock pins NCCL itself."""
    if not inputs.get("overrides"):
        return []
    floor, package = str(inputs["nccl_floor"]), inputs["nccl_package"]
    if inputs["installer"] != "uv":
        return ["sglang_install_installer pip cannot lift torch's exact pin of %s to sglang_install_nccl_floor %s, which "
                "applies here (%s, and NCCL before 2.31.2 fails all-reduces on compute capability 12, NVIDIA/nccl#2418): "
                "pip has no overrides, and resolves torch's pin or fails on it. Use the uv installer, install without "
                "dependencies (sglang_install_no_deps) from a request that lists %s>=%s itself, or set "
                "sglang_install_nccl_floor_policy to never" % (package, floor, _why_floor(inputs), package, floor)]
    lock = str(inputs["requirements_lock"] or "")
    pinned = pinned_version(lock, package)
    if lock and not at_least(pinned, floor):
        found = "pins %s==%s, below sglang_install_nccl_floor %s" % (package, pinned, floor) if pinned else \
            "does not pin %s, which sglang_install_nccl_floor %s needs at or above it" % (package, floor)
        return ["sglang_install_requirements_lock %s (%s): compile the lock with uv pip compile --generate-hashes "
                "--override FILE, FILE holding %s>=%s, or set sglang_install_nccl_floor_policy to never"
                % (found, _why_floor(inputs), package, floor)]
    return []


def _override_names(inputs):
    """The overrides without their hashes, as a reason names them."""
    return [re.split(r"\s+--hash", line, maxsplit=1)[0].strip() for line in inputs.get("overrides") or []]


def _why_floor(inputs):
    return ("sglang_install_nccl_floor_policy is always" if inputs.get("nccl_floor_policy") == "always"
            else "the node's GPUs include compute capability %d" % NCCL_FLOOR_MAJOR)


def _nccl_off(probe, inputs):
    """Why the release's NCCL is below the floor that applies to it, or '': read from its
    METADATA (a torch without NCCL, a CPU build, has none, and nothing is off then)."""
    version = (probe.get("versions") or {}).get(inputs.get("nccl_package")) or ""
    if not inputs.get("overrides") or not version or at_least(version, inputs["nccl_floor"]):
        return ""
    return "%s %s in %s is below sglang_install_nccl_floor %s" % (
        inputs["nccl_package"], version, inputs["release_dir"], inputs["nccl_floor"])


def _install_argv(inputs, reinstall=""):
    """The installer's command line; REINSTALL ``all`` installs every package of the request
    again (an install that did not finish), ``sglang`` SGLang's own files (they differ from its
    RECORD)."""
    compile_bytecode = truthy(inputs["compile_bytecode"])
    source_args = ((["--no-index"] if truthy(inputs["no_index"]) else [])
                   + ["--constraint", inputs["constraints_file"]]
                   + (["--no-deps"] if truthy(inputs["no_deps"]) else [])
                   + (["--require-hashes"] if inputs["requirements_lock"] else []))
    python = inputs["release_dir"] + "/bin/python"
    if inputs["installer"] == "uv":
        head = [inputs["uv_bin"], "--config-file", inputs["sources_file"]["uv"], "pip", "install", "--python", python]
        head += ["--compile-bytecode"] if compile_bytecode else []
        # torch pins NCCL exactly; the override lifts that pin to the floor (nccl_overrides).
        head += ["--override", inputs["overrides_file"]] if inputs.get("overrides") else []
        head += {"all": ["--reinstall"], "sglang": ["--reinstall-package", "sglang"]}.get(reinstall, [])
    else:
        head = [python, "-m", "pip", "install", "--disable-pip-version-check", "--no-input"]
        head += [] if compile_bytecode else ["--no-compile"]
        # pip reinstalls what the request names; without its dependencies where only SGLang's
        # files are off (they were installed in full, and torch is large).
        head += {"all": ["--force-reinstall"], "sglang": ["--force-reinstall"]}.get(reinstall, [])
        if reinstall == "sglang" and not truthy(inputs["no_deps"]):
            source_args = source_args + ["--no-deps"]
    return head + source_args + ["-r", inputs["requirements_file"]]


def _uv(inputs, reinstall=False, check_mode=False):
    """How pip installs uv into its tools venv: with hashes, the one requirement and its hashes
    come on standard input and pip refuses a wheel whose digest is not among them. A uv whose
    files differ from its RECORD (a replaced binary, which the next install runs as root) is
    installed again: without ``creates``, which its METADATA would meet, except in a check,
    where the report task names the files and the command is judged unchanged."""
    hashes = uv_hashes(inputs)
    pin = "uv==%s" % inputs["uv_version"]
    argv = [inputs["uv_venv"] + "/bin/python", "-m", "pip", "install", "--disable-pip-version-check", "--no-input"]
    argv += ["--force-reinstall"] if reinstall else []
    argv += ["--no-index"] if truthy(inputs["no_index"]) else []
    argv += ["--require-hashes", "-r", "/dev/stdin"] if hashes else [pin]
    creates = "%s/lib/python3*/site-packages/uv-%s.dist-info/METADATA" % (inputs["uv_venv"], inputs["uv_version"])
    return {"argv": argv, "stdin": " ".join([pin] + ["--hash=sha256:" + h for h in hashes]) if hashes else "",
            "creates": "" if reinstall and not check_mode else creates}


def _torch(probe, inputs):
    """torch/version.py as the read returned it (never imported): checked when the policy asks
    and the venv's single SGLang sits next to a torch."""
    source = probe.get("torch_version_source") or ""
    checked = (inputs["torch_cuda_policy"] != "ignore" and len(probe.get("sglang_dist_infos") or []) == 1
               and bool(source))
    match = _TORCH_CUDA.search(source)
    cuda = match.group(1) if match else ""
    major = str(inputs["torch_cuda_major"])
    return {
        "checked": checked, "cuda": cuda, "ok": not checked or cuda.split(".")[0] == major,
        "message": "torch in %s is built for CUDA '%s', not CUDA %s.x; install a CUDA %s torch (for example from "
                   "PyTorch's cu130 index through sglang_install_extra_index_urls)"
                   % (inputs["release_dir"], cuda or "none (CPU build)", major, major),
    }


def _account_off(probe, inputs):
    user = probe.get("user") or {}
    if not user.get("exists"):
        return "user %s is missing" % inputs["user"]
    found = [user.get("group"), user.get("home"), user.get("shell")]
    want = [inputs["group"], inputs["user_home"], inputs["user_shell"]]
    if found != want:
        return "user %s has group, home and shell %s, not %s" % (
            inputs["user"], ", ".join(map(str, found)), ", ".join(want))
    return ""


def plan(probe, inputs, files, contents, check_mode=False):
    """The role's plan for one node from its read ``probe``: ``problems`` (stop before any
    change), ``steps`` (``name`` and ``reason``), ``step`` (the first reason of each, by name),
    and what the steps act on: ``files`` (the rows to write, with their checksum and reason, not
    their content),
    ``table`` (every row in force, without content), ``install`` (the installer's ``argv`` and
    the ``creates`` that lets a check judge a release change), ``uv`` (how uv is installed),
    ``torch`` (its CUDA build against the wanted major) and ``prune`` (releases to remove)."""
    installer = inputs["installer"]
    uv = installer == "uv"
    found_problems = problems(probe, inputs)
    steps = []

    def step(name, reason):
        steps.append({"name": name, "reason": reason})

    paths = probe.get("paths") or {}
    # The other installer's rows are out of force; the whole table is checked first.
    mine = [row for row in managed.check("sglang_install", files) if row.get("installer", installer) == installer]
    rows = managed.in_force("sglang_install", mine, contents)
    to_write = []
    for row in rows:
        # The link's owner is the release's: the read takes the release's path too.
        reason = managed.off_in(row, paths)
        needs = _PHASE_NEEDS.get(row.get("phase"))
        if reason and not (check_mode and needs and not probe.get(needs)):
            # Without its content, which may hold credentials (a source URL, a requirement's):
            # the write takes it from the rendered templates, which are no_log where they do.
            to_write.append(dict({key: value for key, value in row.items() if key != "content"}, reason=reason))
    venv_missing = not probe.get("venv_exists")
    uv_venv_missing = uv and not probe.get("uv_venv_exists")
    if inputs["packages"] and (venv_missing or uv_venv_missing):
        step("packages", "a venv is still to be made, with %s" % ", ".join(inputs["packages"]))
    if not (probe.get("group") or {}).get("exists"):
        step("group", "group %s is missing" % inputs["group"])
    account = _account_off(probe, inputs)
    if account:
        step("user", account)
    if uv_venv_missing:
        step("uv_venv", "%s is missing" % inputs["uv_venv"])
    # What is reinstalled because its files are not as installed, each with its reason: the
    # report task names them (a check shows them as drift), the installers run again.
    reinstall = []
    uv_off = ""
    if uv and probe.get("uv_version") != inputs["uv_version"]:
        step("uv", "uv %s is installed, %s is pinned" % (probe.get("uv_version"), inputs["uv_version"])
             if probe.get("uv_version") else "uv %s is not installed" % inputs["uv_version"])
    elif uv:
        uv_off = record_off(probe.get("uv_record"), "uv %s in %s" % (inputs["uv_version"], inputs["uv_venv"]))
        if uv_off:
            reinstall.append(uv_off + "; uv is installed again")
            step("uv", reinstall[-1])
    if venv_missing:
        step("venv", "%s is missing" % inputs["release_dir"] + (
            "; its request holds the override %s (%s)" % (", ".join(_override_names(inputs)), _why_floor(inputs))
            if inputs.get("overrides") else ""))
    if not uv and not (paths.get(inputs["release_dir"] + "/bin/pip") or {}).get("exists"):
        step("pip", "%s has no pip" % inputs["release_dir"])
    for row in to_write:
        step("file", row["reason"])
    # The request changed when a request file's content did (or it is missing): a file whose mode
    # or owner alone is off is set right without installing anything again.
    request_changes = any(row.get("phase") == "request" and _content_off(row, paths) for row in to_write)
    installed = probe.get("sglang_version") or ""
    # An install that did not finish (its mark is still in the venv) is made again in full;
    # a release whose SGLang files differ from its RECORD (deleted, edited; the patch's own
    # entries are not a difference) gets SGLang's files again. Either before anything switches
    # to the release: the activate and service steps come after the install.
    pending = not venv_missing and (paths.get(pending_file(inputs)) or {}).get("exists")
    sglang_off = "" if installed != inputs["version"] else record_off(
        probe.get("sglang_record"), "SGLang %s in %s" % (installed, inputs["release_dir"]))
    mode = "all" if pending else "sglang" if sglang_off else ""
    # An NCCL below the floor in a release otherwise complete: the install runs again, and uv
    # takes the override's NCCL in place of the one there.
    nccl_off = "" if venv_missing or installed != inputs["version"] or pending else _nccl_off(probe, inputs)
    if nccl_off:
        reinstall.append(nccl_off + "; the install runs again")
    if pending:
        reinstall.append("an install into %s did not finish (%s is still there); SGLang %s is installed again"
                         % (inputs["release_dir"], PENDING, inputs["version"]))
    elif sglang_off:
        reinstall.append(sglang_off + "; SGLang %s is installed again" % inputs["version"])
    if check_mode and venv_missing:
        pass  # in a check, the venv still to be made is what is reported
    elif installed != inputs["version"]:
        step("install", "SGLang %s is installed, %s is pinned" % (installed, inputs["version"]) if installed
             else "SGLang %s is not installed" % inputs["version"])
    elif request_changes:
        step("install", "the request changed")
    elif pending or sglang_off or nccl_off:
        step("install", reinstall[-1])
    torch = _torch(probe, inputs)
    if not torch["ok"]:
        step("torch", torch["message"])
    prune = []
    if re.match(r"^[1-9][0-9]*$", str(inputs["keep_releases"])):
        prune = to_prune(probe.get("releases") or [], int(inputs["keep_releases"]), inputs["release_dir"],
                         (paths.get(inputs["venv"]) or {}).get("link") or "")
    if prune:
        step("prune", "beyond sglang_install_keep_releases: %s" % ", ".join(prune))
    creates = "%s/lib/python3*/site-packages/sglang-%s.dist-info/METADATA" % (inputs["release_dir"], inputs["version"])
    return dict(managed.plan_head(found_problems, steps, to_write, rows), **{
        "install": {"argv": _install_argv(inputs, mode),
                    # A changed request is reported by its files; without it, a release that
                    # is not there is what a check reports. A release installed again has its
                    # METADATA: no `creates` then, except in a check, where the report task
                    # names its files.
                    "creates": "" if request_changes or ((mode or nccl_off) and not check_mode) else creates,
                    "pending": pending_file(inputs)},
        # Why the installers run again over what is installed: one clause each, for the task
        # that reports it (a check's drift).
        "reinstall": reinstall,
        "uv": _uv(inputs, bool(uv_off), check_mode),
        "torch": torch,
        "prune": prune,
        # The release's NCCL against NVIDIA/nccl#2418 on these GPUs, as the smoke test's finding
        # words it: the drift report's note before any smoke test ran, floor or not.
        "nccl_finding": version_finding((probe.get("versions") or {}).get(inputs.get("nccl_package")),
                                        inputs.get("capability_majors")) or "",
    })
