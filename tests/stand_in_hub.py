"""A stand-in for the Hugging Face hub, for the lab: serves the model snapshots under a directory
as repositories through the part of the hub's HTTP API that huggingface_hub's snapshot_download
and model_info read (HF_ENDPOINT points here). Test double: the real hub cannot be reached from
the lab. Standard library only, so it runs on a stock node's python3.

    python3 stand_in_hub.py ROOT PORT RECORD

ROOT/<org>/<name>/ is the repository <org>/<name> at one commit (the digest of its files). Every
request is appended to RECORD as a JSON line: method, path, the Authorization header it carried,
and, on the first file download, every process's command line on the machine at that moment
(what `ps` would show while the download runs).
"""
from __future__ import annotations

import hashlib
import json
import os
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote, urlsplit

LOCK = threading.Lock()
SEEN = {"downloads": 0}


def command_lines() -> list[str]:
    out = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                out.append((entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace"))
            except OSError:
                continue
    return out


class Hub(BaseHTTPRequestHandler):
    root: Path
    record: Path

    def log_message(self, *args):  # the record file is the log
        pass

    def _note(self, **extra):
        entry = {"method": self.command, "path": self.path,
                 "authorization": self.headers.get("Authorization", ""), **extra}
        with LOCK, self.record.open("a") as handle:
            handle.write(json.dumps(entry) + "\n")

    def _repo(self, org: str, name: str):
        repo = self.root / org / name
        if not repo.is_dir():
            return None, None, None
        files = sorted(str(p.relative_to(repo)) for p in repo.rglob("*") if p.is_file())
        digest = hashlib.sha1()
        for name_ in files:
            digest.update(name_.encode() + b"\0" + (repo / name_).read_bytes())
        return repo, files, digest.hexdigest()

    def _send(self, status: int, body: bytes, headers: dict, head: bool):
        self.send_response(status)
        for key, value in {"Content-Length": str(len(body)), **headers}.items():
            self.send_header(key, value)
        self.end_headers()
        if not head:
            self.wfile.write(body)

    def _serve(self, head: bool):
        parts = [unquote(p) for p in urlsplit(self.path).path.split("/") if p]
        if len(parts) >= 6 and parts[:2] == ["api", "models"] and parts[4] == "revision":
            repo, files, commit = self._repo(parts[2], parts[3])
            self._note()
            if repo is None:
                return self._send(404, b'{"error": "Repository not found"}',
                                  {"X-Error-Code": "RepositoryNotFound"}, head)
            body = json.dumps({"id": f"{parts[2]}/{parts[3]}", "modelId": f"{parts[2]}/{parts[3]}",
                               "sha": commit, "private": False,
                               "siblings": [{"rfilename": f} for f in files]}).encode()
            return self._send(200, body, {"Content-Type": "application/json"}, head)
        if len(parts) >= 5 and parts[2] == "resolve":
            repo, files, commit = self._repo(parts[0], parts[1])
            name = "/".join(parts[4:])
            if repo is None or name not in files:
                self._note()
                return self._send(404, b"", {"X-Error-Code": "EntryNotFound"}, head)
            body = (repo / name).read_bytes()
            extra = {}
            with LOCK:
                if not head and SEEN["downloads"] == 0:
                    extra["command_lines"] = command_lines()
                SEEN["downloads"] += 0 if head else 1
            self._note(**extra)
            etag = hashlib.sha256(body).hexdigest()
            return self._send(200, body, {"X-Repo-Commit": commit, "ETag": f'"{etag}"',
                                          "Content-Type": "application/octet-stream"}, head)
        self._note()
        return self._send(404, b"", {}, head)

    def do_GET(self):
        self._serve(head=False)

    def do_HEAD(self):
        self._serve(head=True)


def main() -> int:
    root, port, record = sys.argv[1:4]
    Hub.root, Hub.record = Path(root), Path(record)
    server = ThreadingHTTPServer(("127.0.0.1", int(port)), Hub)
    print(f"stand-in hub on 127.0.0.1:{port}, pid {os.getpid()}", flush=True)
    server.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main())
