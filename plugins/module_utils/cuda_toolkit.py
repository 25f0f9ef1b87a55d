# -*- coding: utf-8 -*-
# Copyright: blackwell.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A node's CUDA toolkit as the cuda13 role decides on it: packages, alternatives, nvcc.

Pure Python, no Ansible imports: cuda_toolkit_info feeds it what dpkg-query printed and the
paths under /etc/alternatives, and the unit tests feed it text they write themselves.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import re

# dpkg-query -W -f with this format: the three status letters (selection, state, error), the
# package and its version, one package a line.
DPKG_FORMAT = "${db:Status-Abbrev}\t${Package}\t${Version}\n"


def packages(text, patterns):
    """The packages of a ``dpkg-query -W -f DPKG_FORMAT`` listing whose names match one of the
    regular expressions in ``patterns`` in full: name -> ``version``, ``installed`` (dpkg's state
    letter is ``i``) and ``held`` (the selection letter is ``h``). Packages dpkg only remembers
    (removed, configuration files left) are listed with ``installed`` false."""
    wanted = [re.compile(p) for p in patterns]
    found = {}
    for line in text.splitlines():
        fields = line.split("\t")
        if len(fields) != 3:
            continue
        status, name, version = fields
        if not any(w.fullmatch(name) for w in wanted):
            continue
        status = status.ljust(3)
        found[name] = {"version": version, "installed": status[1] == "i", "held": status[0] == "h"}
    return found


def alternatives(names, directory="/etc/alternatives"):
    """Where each alternative's link points (``readlink``), empty when it has none."""
    targets = {}
    for name in names:
        try:
            targets[name] = os.readlink(os.path.join(directory, name))
        except OSError:
            targets[name] = ""
    return targets
