# -*- coding: utf-8 -*-
# Copyright: (c) 2026, blackwell.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
name: gc_freeze
type: aggregate
short_description: Keeps the forked workers' garbage collector off the controller's memory
version_added: 0.1.0
author:
  - blackwell.sglang maintainers (@blackwell-sglang)
description:
  - ansible-playbook forks one worker process for every task and host. A full collection by
    Python's garbage collector in such a worker walks the objects the worker inherited from the
    controller process and writes to each, so the kernel copies the memory pages the worker
    shared with the controller.
  - At the start of each task, before its first worker is forked, this callback collects the
    garbage the controller made since the previous task and moves the objects that are left to
    Python's permanent generation (C(gc.freeze())), which no collection walks, in the controller
    or in the workers forked from it. A worker's own objects are still collected. Under the
    linear strategy the objects the controller makes for the task's later hosts (their
    variables) are made after the freeze.
  - It prints nothing and changes no result. At the start of each play (each serial batch)
    the controller unfreezes and collects everything once, so objects frozen during the
    previous batch that have since become unreachable reference cycles are released.
  - A C(site.yml --check) of one converged lab node used 7 to 10% less controller CPU with it
    (benchmarks/README.md).
requirements:
  - Enable it by name, C(callbacks_enabled = blackwell.sglang.gc_freeze) in C(ansible.cfg) (the
    collection's own C(ansible.cfg) does, and C(tools/drift-report) adds it to the list it
    passes) or C(ANSIBLE_CALLBACKS_ENABLED=blackwell.sglang.gc_freeze). That environment
    variable replaces the list of C(ansible.cfg), so a run that sets it names this callback in it
    too.
"""

EXAMPLES = r"""
# ansible.cfg
# [defaults]
# callbacks_enabled = blackwell.sglang.gc_freeze

# beside the drift report, for one run:
# ANSIBLE_CALLBACKS_ENABLED=blackwell.sglang.gc_freeze,blackwell.sglang.drift_report \
#   ansible-playbook site.yml -i inventories/lab --check --diff
"""

import gc

from ansible.plugins.callback import CallbackBase


class CallbackModule(CallbackBase):
    """Freezes the controller's objects at the start of each task, before its workers fork."""

    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "blackwell.sglang.gc_freeze"
    CALLBACK_NEEDS_ENABLED = True

    @staticmethod
    def _freeze():
        # Only what is not frozen yet is walked: cheap after the first task.
        gc.collect()
        gc.freeze()

    def v2_playbook_on_play_start(self, play):
        gc.unfreeze()
        self._freeze()

    def v2_playbook_on_task_start(self, task, is_conditional):
        self._freeze()

    def v2_playbook_on_handler_task_start(self, task):
        self._freeze()

    def v2_playbook_on_stats(self, stats):
        gc.unfreeze()
