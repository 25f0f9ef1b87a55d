#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: blackwell.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: nccl_smoke
short_description: Prove that a node's GPUs all-reduce through NCCL, and measure the bus bandwidth
version_added: 0.1.0
description:
  - Runs an all-reduce over all the node's GPUs in one NCCL process group, one process per GPU,
    with the torch of the given Python (the SGLang venv's own), at a few sizes.
  - Every sum is checked exactly, and the algorithm and bus bandwidth of each size are measured
    (bus bandwidth = algorithm bandwidth times C(2(n-1)/n), the figure nccl-tests report).
  - The run has a hard timeout; when it passes, the whole process group of the test is killed,
    so a hanging collective becomes a failure instead of a hung task.
  - A Python without torch is reported with RV(torch_missing), not as a failure.
  - Writes nothing but temporary files, which it removes; it takes the GPUs for the length of
    the run, so callers choose whether to run it in check mode.
author:
  - blackwell.sglang maintainers (@blackwell-sglang)
options:
  python:
    description:
      - The interpreter whose torch runs the test, for example C(/opt/sglang/current/bin/python).
    type: path
    required: true
  sizes_kib:
    description:
      - The message sizes, in KiB of float32 data per GPU.
    type: list
    elements: int
    default: [64, 1024, 16384, 262144]
  iterations:
    description:
      - Timed all-reduces per size, after O(warmup) untimed ones.
    type: int
    default: 20
  warmup:
    description:
      - Untimed all-reduces per size before the timed ones.
    type: int
    default: 5
  timeout:
    description:
      - Seconds the whole test may take, torch's import and NCCL's set-up included.
    type: int
    default: 60
  environment:
    description:
      - Environment variables for the test (NCCL settings, C(CUDA_VISIBLE_DEVICES)), on top of
        the module's own environment.
    type: dict
    default: {}
  sandbox:
    description:
      - Run the test as this account inside a transient systemd service with these properties
        (C(systemd-run)), never as the module's user; the Python's packages (a new release's,
        any C(.pth) file among them) then run only as the engine would, in its sandbox.
      - Without it, the test runs as the module's user; the role C(blackwell.sglang.sglang_service)
        always gives the engine's account and sandbox.
    type: dict
    suboptions:
      user:
        description: The account the test runs as.
        type: str
        required: true
      group:
        description: Its group.
        type: str
        required: true
      properties:
        description: Unit properties of the sandbox, C(Key=Value) each (the engine unit's).
        type: list
        elements: str
        default: []
  capability_majors:
    description:
      - The compute capability majors of the node's GPUs (gpu_facts' C(capability_majors)), against
        which RV(nccl_finding) judges the NCCL version the test reports.
    type: list
    elements: int
    default: []
  fail_on_error:
    description:
      - Fail when the test hangs, fails or returns a wrong sum. With C(false) the module reports
        RV(passed) and RV(msg) and leaves the decision to the caller.
    type: bool
    default: true
attributes:
  check_mode:
    support: full
    description: Changes nothing on disk, so it runs the same in check mode.
  diff_mode:
    support: none
    description: Changes nothing, so there is no diff.
notes:
  - Likely causes of a hang or of wrong sums on PCIe machines are the IOMMU, PCIe ACS
    redirection and BIOS settings (NVIDIA/nccl issues 1999 and 2079, vLLM issue 33041).
"""

EXAMPLES = r"""
- name: All-reduce over the node's GPUs with the SGLang venv's torch
  blackwell.sglang.nccl_smoke:
    python: /opt/sglang/current/bin/python
    environment:
      NCCL_NVLS_ENABLE: "0"
  register: smoke

- name: Show the bus bandwidth
  ansible.builtin.debug:
    msg: "{{ smoke.summary.busbw_gbps }} GB/s at {{ smoke.summary.busbw_bytes }} bytes"
"""

RETURN = r"""
passed:
  description: Whether every all-reduce finished in time with exact sums; null when torch is missing.
  returned: always
  type: bool
  sample: true
torch_missing:
  description: Whether O(python) cannot import torch (nothing was run).
  returned: always
  type: bool
  sample: false
timed_out:
  description: Whether the test was killed at O(timeout).
  returned: always
  type: bool
  sample: false
msg:
  description: What went wrong, or a one-line summary when it passed.
  returned: always
  type: str
  sample: "2 GPUs, busbw 361.2 GB/s at 268435456 bytes"
report:
  description: The test's report as it printed it; null when it printed none.
  returned: always
  type: dict
  sample:
    ok: true
    world_size: 2
    torch: 2.11.0+cu130
    nccl: 2.28.9
    results:
      - {bytes: 268435456, dtype: float32, iterations: 20, time_us: 1100.5,
         algbw_gbps: 243.9, busbw_gbps: 243.9, mismatches: 0}
summary:
  description: The bus bandwidth at the largest size (and by size); null unless a report was read.
  returned: always
  type: dict
  sample:
    ok: true
    world_size: 2
    busbw_gbps: 243.9
    busbw_bytes: 268435456
    by_size: {"268435456": 243.9}
nccl_finding:
  description: >-
    What is wrong with the NCCL version the test reported on GPUs of O(capability_majors), naming
    the remedy (before 2.31.2 on compute capability 12, NVIDIA/nccl#2418); null when nothing is or
    nothing was run. It does not fail the module.
  returned: always
  type: str
  sample: null
note:
  description: >-
    The line the drift report shows for this test (the role sets it as the topic C(nccl_smoke)
    of the fact C(blackwell_sglang_notes)); null when nothing was run.
  returned: always
  type: str
  sample: "passed: 243.9 GB/s bus bandwidth over 2 GPUs"
seconds:
  description: Wall-clock seconds the test took.
  returned: always
  type: float
  sample: 14.2
stderr:
  description: The last lines of the test's standard error, for a failure's diagnosis.
  returned: always
  type: str
  sample: ""
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.blackwell.sglang.plugins.module_utils import nccl, sandbox_run


def main():
    module = AnsibleModule(
        argument_spec=dict(
            python=dict(type="path", required=True),
            sizes_kib=dict(type="list", elements="int", default=list(nccl.DEFAULT_SIZES_KIB)),
            iterations=dict(type="int", default=20),
            warmup=dict(type="int", default=5),
            timeout=dict(type="int", default=nccl.DEFAULT_TIMEOUT),
            environment=dict(type="dict", default={}),
            sandbox=sandbox_run.OPTION,
            capability_majors=dict(type="list", elements="int", default=[]),
            fail_on_error=dict(type="bool", default=True),
        ),
        supports_check_mode=True,
    )
    params = module.params
    if any(size < 1 for size in params["sizes_kib"]) or not params["sizes_kib"]:
        module.fail_json(msg="sizes_kib must list sizes of at least 1 KiB")
    if params["iterations"] < 1 or params["warmup"] < 0 or params["timeout"] < 1:
        module.fail_json(msg="iterations and timeout must be at least 1, warmup at least 0")

    outcome = nccl.run(params["python"], params["sizes_kib"], params["iterations"],
                       params["warmup"], params["timeout"], params["environment"], params["sandbox"])
    report = None
    if not outcome["timed_out"]:
        try:
            report = nccl.parse_report(outcome["stdout"])
        except nccl.SmokeError:
            report = None
    result = dict(
        changed=False,
        passed=None,
        torch_missing=bool(report and report.get("torch_missing")),
        timed_out=outcome["timed_out"],
        report=report,
        summary=None,
        seconds=outcome["seconds"],
        stderr="\n".join(outcome["stderr"].strip().splitlines()[-20:]),
    )
    if result["torch_missing"]:
        result["msg"] = "%s cannot import torch: nothing was run" % params["python"]
        module.exit_json(note=None, nccl_finding=None, **result)
    reason = nccl.failure_message(report, outcome["timed_out"], params["timeout"],
                                  outcome["rc"], outcome["stderr"])
    result["passed"] = reason is None
    if report is not None and report["results"]:
        result["summary"] = nccl.summarize(report)
    result["note"] = nccl.note(dict(result["summary"] or {}, ran=True, passed=result["passed"], msg=reason))
    result["nccl_finding"] = nccl.version_finding((report or {}).get("nccl"), params["capability_majors"])
    if reason is None:
        result["msg"] = "%d GPUs, busbw %s GB/s at %s bytes" % (
            report["world_size"], result["summary"]["busbw_gbps"], result["summary"]["busbw_bytes"])
        module.exit_json(**result)
    result["msg"] = "%s. Likely causes: %s" % (reason, nccl.LIKELY_CAUSES)
    if params["fail_on_error"]:
        module.fail_json(**result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
