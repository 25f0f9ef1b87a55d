"""Starts ``sglang.launch_server`` with the API key kept out of argv and out of the logs.

systemd runs this file with the venv's Python in place of ``python -m sglang.launch_server``.
The key arrives in the environment, from the root-owned 0600 EnvironmentFile, so neither the
unit, ``systemctl show`` nor the exec argv (``/proc/<pid>/cmdline``, ``ps``) carries it.
SGLang reads its key only from ``--api-key``, so the key is appended to ``sys.argv`` inside this
process, which the kernel's copy of the argv does not see, and ``sglang.launch_server`` runs in
this same process.

SGLang logs its whole ``ServerArgs``, key included, at INFO when it starts (``engine.py``).
Before any of SGLang is imported, every log record and everything written to ``sys.stdout`` and
``sys.stderr`` gets the key (and the Hugging Face token) replaced by ``<redacted>``. SGLang
starts its scheduler and detokenizer processes with multiprocessing's spawn method, which
runs this file again (as ``__mp_main__``) in each child before anything else, so the children
mask too; they inherit the environment the secrets are read from.

The venv systemd names is the link to the active release (/opt/sglang/current). Before anything
else the launcher executes itself again with that release's own interpreter path, so the
server runs from the release the link pointed at when it started, whatever the link points at
later (a module imported after a switch still comes from the same release), and its
``/proc/<pid>/cmdline`` tells which release it runs.

Not covered: bytes written to file descriptors 1 and 2 below Python (C extensions, a fatal
error's faulthandler dump), and a secret split over two separate ``write`` calls.
"""
import json
import logging
import os
import runpy
import sys

API_KEY_VARIABLE = "SGLANG_API_KEY"
# Masked too, though SGLang reads it from the environment itself and does not log it.
MASKED_VARIABLES = (API_KEY_VARIABLE, "HF_TOKEN")
MASK = "<redacted>"


def _secret_spellings():
    """Every spelling of a secret a log line can hold: as is, inside a repr, inside JSON."""
    spellings = set()
    for name in MASKED_VARIABLES:
        value = os.environ.get(name, "")
        if value:
            spellings.update((value, repr(value)[1:-1], json.dumps(value)[1:-1]))
    # Longest first, so a spelling that contains another is replaced whole.
    return sorted((s for s in spellings if s), key=len, reverse=True)


SECRETS = _secret_spellings()


def mask(text):
    for secret in SECRETS:
        if secret in text:
            text = text.replace(secret, MASK)
    return text


class MaskingStream:
    """A text stream that masks what it writes and behaves as the stream it wraps otherwise."""

    def __init__(self, stream):
        self._stream = stream

    def write(self, text):
        return self._stream.write(mask(text) if isinstance(text, str) else text)

    def writelines(self, lines):
        for line in lines:
            self.write(line)

    def __getattr__(self, name):
        return getattr(self._stream, name)


def install():
    """Mask the secrets in every log record and on stdout/stderr of this process."""
    if not SECRETS or getattr(logging, "_blackwell_sglang_masking", False):
        return
    make_record = logging.getLogRecordFactory()

    # A record factory, unlike a filter, holds for every logger and handler, including the
    # ones SGLang and uvicorn set up later (logging.basicConfig(force=True), dictConfig).
    def masked_record(*args, **kwargs):
        record = make_record(*args, **kwargs)
        try:
            message = record.getMessage()
        except Exception:  # a malformed record: leave it to logging's own error report
            return record
        masked = mask(message)
        if masked != message:
            record.msg, record.args = masked, ()
        return record

    logging.setLogRecordFactory(masked_record)
    logging._blackwell_sglang_masking = True
    # Handlers created from now on (SGLang's, uvicorn's) write through these.
    if sys.stdout is not None:
        sys.stdout = MaskingStream(sys.stdout)
    if sys.stderr is not None:
        sys.stderr = MaskingStream(sys.stderr)


def pin_release():
    """Execute this file again from the release the venv link points at (same process)."""
    release = os.path.realpath(sys.prefix)
    python = os.path.join(release, "bin", os.path.basename(sys.executable) or "python")
    if release != sys.prefix and os.path.exists(python):
        os.execv(python, [python] + sys.argv)


def main():
    arguments = sys.argv[1:]
    if "--api-key" in arguments or any(word.startswith("--api-key=") for word in arguments):
        sys.exit("sglang_launch: pass the API key in %s, not on the command line" % API_KEY_VARIABLE)
    key = os.environ.get(API_KEY_VARIABLE, "")
    if key:
        arguments += ["--api-key", key]
    sys.argv = ["sglang.launch_server"] + arguments
    # alter_sys=False keeps this file as __main__, so multiprocessing's spawn children run it
    # (and install the masking) before they unpickle their work.
    runpy.run_module("sglang.launch_server", run_name="__main__", alter_sys=False)


if __name__ == "__main__":
    pin_release()

install()

if __name__ == "__main__":
    main()
