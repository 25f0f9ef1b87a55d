"""The stand-in's imitation of SGLang's start-up logging: NOT SGLang's code.

What it imitates, as the real releases do it (read from their wheels):
  - ``engine.py`` configures logging with ``logging.basicConfig(..., force=True)``
    (``configure_logger``) and then logs the whole server arguments at INFO:
    ``logger.info(f"{server_args=}")`` (0.5.8, 0.5.18) or
    ``logger.info(f"server_args={_server_args_for_logging(server_args)}")`` (0.5.23). The repr of
    ``ServerArgs`` (a dataclass whose ``api_key`` field is shown) and 0.5.23's resolved dict both
    carry the key.
  - The scheduler and detokenizer run in children started with multiprocessing's spawn
    method, which receive the pickled server arguments and configure logging again.

The real ``ServerArgs`` cannot be built here: importing ``sglang.srt.server_args`` imports torch
in every release the collection supports (``srt/connector/base_connector.py`` in 0.5.8,
``srt/platforms/__init__.py`` in 0.5.18 and 0.5.23), and PyPI's torch is a CUDA build that loads
gigabytes of NVIDIA libraries at import. So this dataclass holds the argv the stand-in was given,
the key included, and is logged the same way, by the same logger name, in the main process and
in a spawned child.
"""
import dataclasses
import logging
import multiprocessing
import multiprocessing.resource_tracker
import time

LOGGER = "sglang.srt.entrypoints.engine"
FORMAT = "[%(asctime)s] %(message)s"


@dataclasses.dataclass
class ServerArgsImitation:
    """Named fields of the launch argv ("--api-key" becomes api_key), shown by the repr."""

    fields: dict

    @classmethod
    def from_argv(cls, argv):
        fields, index = {}, 0
        while index < len(argv):
            word = argv[index]
            if word.startswith("--"):
                name, equals, value = word[2:].partition("=")
                if not equals and index + 1 < len(argv) and not argv[index + 1].startswith("--"):
                    value, index = argv[index + 1], index + 1
                fields[name.replace("-", "_")] = value or True
            index += 1
        return cls(fields)


def _configure_logger():
    logging.basicConfig(level=logging.INFO, format=FORMAT, datefmt="%Y-%m-%d %H:%M:%S", force=True)


def scheduler_process(server_args):
    """A spawned child that, like SGLang's scheduler, configures logging and logs; it stays up
    (so its argv can be read) until the launcher ends it."""
    _configure_logger()
    # An f-string, as SGLang's own statement: the message arrives formatted, with no args.
    logging.getLogger(LOGGER).info(f"scheduler child: {server_args=}")  # pylint: disable=logging-fstring-interpolation
    while True:
        time.sleep(3600)


def log_startup(argv):
    """engine.py's start-up logging, then one spawned child doing the same; returns the child."""
    _configure_logger()
    server_args = ServerArgsImitation.from_argv(argv)
    logging.getLogger(LOGGER).info(f"{server_args=}")  # pylint: disable=logging-fstring-interpolation
    child = multiprocessing.get_context("spawn").Process(
        target=scheduler_process, args=(server_args,), daemon=True
    )
    child.start()
    return child


def stop(child):
    """Ends the spawned child and multiprocessing's resource tracker (started with the child, it
    otherwise outlives this process by a moment) and waits for both, so that the process group
    is empty when the main process exits."""
    child.terminate()
    child.join(10)
    # No public call stops the tracker; _stop() closes its pipe and reaps it (3.8 to 3.13).
    multiprocessing.resource_tracker._resource_tracker._stop()  # pylint: disable=protected-access
