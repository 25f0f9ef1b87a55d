# Downloads a model into a Hugging Face hub cache as the given account, with the venv's own
# huggingface_hub; run as root by the sglang_model role (ansible.builtin.script).
#   hf_download.py USER REPO_ID REVISION CACHE_DIR ALLOW_PATTERNS_JSON ENV_FILE
# HF_TOKEN is read here, as root, from ENV_FILE (the root-owned 0600 secrets file, written with
# systemd's double quotes), so the token never passes through a command line or a task's
# variables; without one there, HF_TOKEN from the environment is used. HF_ENDPOINT comes from
# the environment. Prints one JSON line: the snapshot path and the repository's file list at
# that revision (the files the role then verifies).
import json
import os
import pwd
import sys


def unquote(value):
    """A value of a systemd environment file as systemd reads it: inside double quotes a
    backslash escapes a double quote, a backslash, a dollar sign or a backquote."""
    value = value.strip()
    if len(value) < 2 or value[0] != '"' or value[-1] != '"':
        return value
    out, chars = [], iter(value[1:-1])
    for char in chars:
        if char == "\\":
            following = next(chars, "")
            out.append(following if following in '"\\$`' else char + following)
        else:
            out.append(char)
    return "".join(out)


def token_from_env_file(path):
    """The HF_TOKEN value of an environment file; None if there is none."""
    try:
        with open(path) as handle:
            lines = handle.read().splitlines()
    except OSError:
        return None
    for line in lines:
        if line.startswith("HF_TOKEN="):
            return unquote(line.split("=", 1)[1]) or None
    return None


def main():
    user, repo_id, revision, cache_dir, patterns, env_file = sys.argv[1:7]
    token = token_from_env_file(env_file)
    if token:
        os.environ["HF_TOKEN"] = token
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
