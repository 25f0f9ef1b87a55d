# -*- coding: utf-8 -*-
# Copyright: blackwell.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A command run as a service account inside a transient systemd service: how the modules run a
release's code (its Python, its site-packages and any .pth file there) before the release has
passed its gate, never as root and never outside the sandbox the role gives (the engine unit's).

Plain Python that runs on the node under the module's interpreter."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import time


# The argument spec of a module's ``sandbox`` option: the account, its group, the unit's properties.
OPTION = dict(type="dict", options=dict(
    user=dict(type="str", required=True),
    group=dict(type="str", required=True),
    properties=dict(type="list", elements="str", default=[]),
))


def unit_name(purpose):
    """A unit name of its own for one run of PURPOSE."""
    return "blackwell-sglang-%s-%d-%d.service" % (purpose, os.getpid(), int(time.time() * 1000))


def argv(unit, sandbox, environment, command, timeout=None):
    """systemd-run's command line for COMMAND in the transient service UNIT: run as the
    sandbox's user and group with its properties, ENVIRONMENT set in it (never a secret: pass
    those on standard input), stopped by systemd after TIMEOUT seconds when given, its standard
    input and output piped to the caller, collected once it ends."""
    words = ["systemd-run", "--quiet", "--wait", "--pipe", "--collect", "--service-type=exec",
             "--unit=%s" % unit, "--property=User=%s" % sandbox["user"],
             "--property=Group=%s" % sandbox["group"]]
    if timeout:
        words.append("--property=RuntimeMaxSec=%d" % int(timeout))
    words += ["--property=%s" % prop for prop in sandbox.get("properties") or []]
    words += ["--setenv=%s=%s" % (name, value) for name, value in sorted(environment.items())]
    return words + ["--"] + list(command)
