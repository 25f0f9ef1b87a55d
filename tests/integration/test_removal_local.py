"""The removal of sglang_router, sglang_service and sglang_install, as playbooks/remove.yml
runs them, in check mode on this machine: no container, seconds. Nothing here has the collection
installed, so every path is already absent and nothing may change; what is asserted is that the
three roles run to the end and that each removal loop names exactly the paths of its role's
table (the lab's fleet tests remove them from converged nodes). systemd is not this machine's
init: a stand-in systemctl, named as such, answers `systemctl show` for a unit systemd does not
know.

A run of a role's own present tasks is skipped on a removal, but a skipped task still registers
its result: a register named like a variable of the role would replace it here."""
from __future__ import annotations

import os

from ansible_collections.blackwell.sglang.plugins.plugin_utils import managed
from conftest import local_play_tasks

import role_vars

STANDIN_SYSTEMCTL = """#!/bin/sh
# Stand-in for systemctl on a machine whose init is not systemd: no unit is known.
if [ "$1" = show ]; then
  printf 'LoadState=not-found\\nActiveState=inactive\\nSubState=dead\\nUnitFileState=\\nMainPID=0\\n'
fi
exit 0
"""


def test_removal_of_the_service_and_the_install_in_check_mode_names_each_tables_paths(tmp_path, monkeypatch):
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "systemctl").write_text(STANDIN_SYSTEMCTL)
    (bindir / "systemctl").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ['PATH']}")
    play = [{"name": "Remove as playbooks/remove.yml does", "hosts": "localhost", "gather_facts": False,
             "roles": [{"role": "blackwell.sglang.sglang_router", "sglang_router_state": "absent"},
                       {"role": "blackwell.sglang.sglang_service", "sglang_service_state": "absent"},
                       {"role": "blackwell.sglang.sglang_install", "sglang_install_state": "absent"}]}]
    tasks = local_play_tasks(tmp_path, play, "--check")
    assert [name for name, result in tasks if result.get("failed")] == []
    assert [name for name, result in tasks if result.get("changed")] == []
    loops = {name: [item["item"] for item in result.get("results", [])] for name, result in tasks
             if name.startswith(("blackwell.sglang.sglang_router : Remove what the role wrote",
                                 "blackwell.sglang.sglang_service : Remove the unit",
                                 "blackwell.sglang.sglang_install : Remove the releases"))}
    service = managed.removal("sglang_service", role_vars.render("sglang_service", "__sglang_service_files"))
    install = managed.removal("sglang_install", role_vars.render("sglang_install", "__sglang_install_files"))
    router = managed.removal("sglang_router", role_vars.render("sglang_router", "__sglang_router_files"))
    assert router == ["/var/lib/sglang-router", "/etc/systemd/system/sglang-router.service", "/usr/local/lib/sglang-router",
                      "/etc/sglang-router", "/opt/sglang-router"]
    assert list(loops.values()) == [router, ["/etc/systemd/system/sglang.service.d", *service], [*install, "/opt/sglang"]]
