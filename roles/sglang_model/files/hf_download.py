# Downloads a model into a Hugging Face hub cache as the given account, with the venv's own
# huggingface_hub; run as root by the sglang_model role (ansible.builtin.script).
#   hf_download.py USER REPO_ID REVISION CACHE_DIR ALLOW_PATTERNS_JSON
# Prints one JSON line: the snapshot path and the repository's file list at that revision
# (the files the role then verifies). HF_TOKEN and HF_ENDPOINT come from the environment.
import json
import os
import pwd
import sys


def main():
    user, repo_id, revision, cache_dir, patterns = sys.argv[1:6]
    account = pwd.getpwnam(user)
    if os.getuid() == 0 and account.pw_uid != 0:
        # Files written into the cache belong to the account that serves the model.
        os.setgroups([])
        os.setgid(account.pw_gid)
        os.setuid(account.pw_uid)
        os.environ["HOME"] = account.pw_dir
    from huggingface_hub import HfApi, snapshot_download

    allow = json.loads(patterns) or None
    path = snapshot_download(repo_id=repo_id, revision=revision, cache_dir=cache_dir,
                             allow_patterns=allow)
    # The repository's own list at the resolved revision, narrowed as the download was.
    info = HfApi().model_info(repo_id, revision=revision)
    files = sorted(sibling.rfilename for sibling in info.siblings)
    if allow:
        from fnmatch import fnmatch
        files = [name for name in files if any(fnmatch(name, pattern) for pattern in allow)]
    print(json.dumps({"path": path, "files": files}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
