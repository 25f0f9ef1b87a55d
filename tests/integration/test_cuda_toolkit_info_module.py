"""blackwell.sglang.cuda_toolkit_info run by Ansible against localhost: this machine's own dpkg
database and alternatives, the real nvcc 13.0 and signing key of the lab's CUDA repository
(tools/lab/build-cuda-repo.sh: unpacked from NVIDIA's nvcc wheel, signed with a key made per
build), and the key served over HTTP on loopback. Each case asserts the exact result; check mode
returns the same."""
from __future__ import annotations

import hashlib
import http.server
import os
import socket
import subprocess
import threading
from pathlib import Path

import pytest

from conftest import ROOT, run_local_module

MODULE = "blackwell.sglang.cuda_toolkit_info"


def run_module(args: dict, *flags: str) -> tuple[int, dict]:
    return run_local_module(MODULE, args, *flags)


@pytest.fixture(scope="module")
def lab_repo(tmp_path_factory) -> dict:
    """The lab repository's key, its fingerprint and the real nvcc 13.0 unpacked from its package."""
    proc = subprocess.run([str(ROOT / "tools" / "lab" / "build-cuda-repo.sh")], capture_output=True, text=True,
                          check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    repo = Path(proc.stdout.strip().splitlines()[-1]) / "debian12" / "x86_64"
    tree = tmp_path_factory.mktemp("nvcc")
    (deb,) = repo.glob("cuda-nvcc-13-0_*_amd64.deb")
    subprocess.run(["dpkg-deb", "-x", str(deb), str(tree)], check=True)
    return {"key": repo / "cuda-archive-key.pub",
            "fingerprint": (repo / "cuda-archive-key.fingerprint").read_text().strip(),
            "nvcc": tree / "usr" / "local" / "cuda-13.0" / "bin" / "nvcc"}


def test_packages_links_tree_paths_and_nvcc_as_the_node_has_them(tmp_path, lab_repo):
    written = tmp_path / "cuda13.sh"
    written.write_text("export CUDA_HOME=/usr/local/cuda\n")
    written.chmod(0o644)
    args = {"packages": ["dpkg", "cuda-toolkit-13-0", "python3-apt-nothing-[0-9]+"],
            "alternatives": ["which", "cuda-nothing"], "tree": str(tmp_path),
            "paths": [str(written), str(tmp_path / "absent")], "nvcc": str(lab_repo["nvcc"])}
    rc, res = run_module(args)
    assert rc == 0, res
    assert res["changed"] is False
    dpkg_version = subprocess.run(["dpkg-query", "-W", "-f", "${Version}", "dpkg"], capture_output=True, text=True,
                                  check=True).stdout
    assert res["packages"] == {"dpkg": {"version": dpkg_version, "installed": True, "held": False}}
    assert res["alternatives"] == {"which": os.readlink("/etc/alternatives/which"), "cuda-nothing": ""}
    assert res["tree_exists"] is True
    assert res["paths"][str(tmp_path / "absent")] == {"exists": False}
    assert res["paths"][str(written)]["checksum"] == hashlib.sha1(written.read_bytes()).hexdigest()
    assert res["paths"][str(written)]["mode"] == "0644"
    assert res["nvcc"]["executable"] is True
    assert "Cuda compilation tools, release 13.0, V13.0.88" in res["nvcc"]["output"]
    assert "key" not in res
    rc, checked = run_module(args, "--check")
    assert rc == 0
    assert {k: checked[k] for k in res if not k.startswith("_")} == {k: res[k] for k in res if not k.startswith("_")}


def test_nothing_asked_nothing_read(tmp_path):
    rc, res = run_module({"tree": str(tmp_path / "cuda-13.0"), "nvcc": str(tmp_path / "nvcc")})
    assert rc == 0, res
    assert (res["packages"], res["alternatives"], res["paths"], res["tree_exists"]) == ({}, {}, {}, False)
    assert res["nvcc"] == {"path": str(tmp_path / "nvcc"), "executable": False, "output": ""}


def test_the_key_from_the_node_and_as_text_has_its_fingerprint(lab_repo):
    armored = lab_repo["key"].read_text()
    rc, from_path = run_module({"key_path": str(lab_repo["key"])})
    assert rc == 0, from_path
    assert from_path["key"] == {"source": str(lab_repo["key"]), "fingerprints": [lab_repo["fingerprint"]],
                                "armored": armored}
    rc, from_text = run_module({"key_content": armored})
    assert rc == 0, from_text
    assert (from_text["key"]["source"], from_text["key"]["fingerprints"]) == ("content", [lab_repo["fingerprint"]])


class _KeyServer(http.server.BaseHTTPRequestHandler):
    key = b""

    def do_GET(self):  # noqa: N802 - the name http.server calls
        if self.path == "/3bf863cc.pub":
            self.send_response(200)
            self.end_headers()
            self.wfile.write(self.key)
        elif self.path == "/short.pub":
            # An answer cut short: the length promised, half the key sent, the connection closed.
            self.send_response(200)
            self.send_header("Content-Length", str(len(self.key)))
            self.end_headers()
            self.wfile.write(self.key[:len(self.key) // 2])
            self.close_connection = True
        else:
            self.send_error(404)

    def log_message(self, *args):
        pass


def test_the_key_from_a_url_and_the_answer_when_there_is_none(lab_repo):
    _KeyServer.key = lab_repo["key"].read_bytes()
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _KeyServer)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_port}"
    try:
        rc, found = run_module({"key_url": f"{base}/3bf863cc.pub"})
        assert rc == 0, found
        assert found["key"]["fingerprints"] == [lab_repo["fingerprint"]]
        assert found["key"]["download"] == {"status": 200, "error": None}
        # A server that answers without the key, and no server at all: reported, not failed.
        rc, missing = run_module({"key_url": f"{base}/other.pub"})
        assert rc == 0, missing
        assert (missing["key"]["fingerprints"], missing["key"]["armored"]) == ([], "")
        assert missing["key"]["download"]["status"] == 404
        rc, short = run_module({"key_url": f"{base}/short.pub"})
        assert rc == 0, short
        assert (short["key"]["fingerprints"], short["key"]["download"]["status"]) == ([], -1)
        assert "incompleteread" in short["key"]["download"]["error"].lower().replace(" ", ""), short
    finally:
        server.shutdown()
        server.server_close()
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        closed = probe.getsockname()[1]
    rc, nothing = run_module({"key_url": f"http://127.0.0.1:{closed}/3bf863cc.pub", "key_timeout": 5})
    assert rc == 0, nothing
    assert nothing["key"]["download"]["status"] == -1
    assert "refused" in nothing["key"]["download"]["error"].lower()


def test_what_is_no_key_fails_naming_it(tmp_path):
    junk = tmp_path / "junk.pub"
    junk.write_text("not a key\n")
    rc, res = run_module({"key_path": str(junk)})
    assert rc == 2
    assert res["msg"].startswith(f"{junk} is not an OpenPGP public key file: ")
    rc, res = run_module({"key_path": str(tmp_path / "absent.pub")})
    assert rc == 2
    assert res["msg"] == f"cannot read the key file {tmp_path / 'absent.pub'}: No such file or directory"


def test_the_key_sources_exclude_each_other(lab_repo):
    rc, res = run_module({"key_path": str(lab_repo["key"]), "key_url": "http://127.0.0.1:9/k.pub"})
    assert rc == 2
    assert res["msg"] == "parameters are mutually exclusive: key_path|key_content|key_url"
