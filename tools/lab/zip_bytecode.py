"""Lab nodes only: a bytecode cache for Python source imported from zip archives.

tools/lab/build-image.sh puts this module and a .pth file that imports it into the image's
system Python. Every Ansible module reaches a node as a zip of its code and the
ansible.module_utils it needs (AnsiballZ), and zipimport compiles each source file in it anew on
every run: about a fifth of the CPU a lab node spends on a converge, paid again for each task.
Here compiled code is kept in CACHE, keyed by the file's name inside its archive and the SHA-256
of its source, so a node compiles each source once. What runs is unchanged: the same source
gives the same code, carrying the path of the archive it came from this time.

Used only by root (the roles' tasks run with become) and only when CACHE is a directory that root
owns and no one else may open; otherwise Python compiles as it always does. A real fleet's nodes
have none of this.
"""
import marshal
import os
import stat
import sys
import zipimport

CACHE = "/var/cache/blackwell-lab-zip-bytecode"
_COMPILE = getattr(zipimport, "_compile_source", None)


def _with_filename(code, filename):
    """code, and every code object nested in it, naming filename as its source."""
    consts = tuple(_with_filename(c, filename) if isinstance(c, type(code)) else c for c in code.co_consts)
    return code.replace(co_filename=filename, co_consts=consts)


def _cache_is_private(path):
    try:
        info = os.lstat(path)
    except OSError:
        return False
    return stat.S_ISDIR(info.st_mode) and info.st_uid == 0 and not info.st_mode & 0o077


def compile_source(pathname, source):
    """zipimport's compile step, through the cache."""
    import hashlib  # not at start-up: most Python runs on a node import nothing from a zip

    inner = pathname.split(".zip" + os.sep, 1)[-1]
    path = os.path.join(CACHE, hashlib.sha256(inner.encode() + b"\0" + source).hexdigest())
    try:
        with open(path, "rb") as cached:
            return _with_filename(marshal.load(cached), pathname)
    except (OSError, EOFError, ValueError, TypeError):
        pass
    code = _COMPILE(pathname, source)
    partial = f"{path}.{os.getpid()}"
    try:
        with open(partial, "wb") as out:
            marshal.dump(code, out)
        os.replace(partial, path)
    except OSError:
        pass
    return code


def install():
    """Route zipimport's compiling through the cache, where it can be used."""
    if _COMPILE is not None and os.geteuid() == 0 and not sys.flags.optimize and _cache_is_private(CACHE):
        zipimport._compile_source = compile_source


install()
