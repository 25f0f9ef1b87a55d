# -*- coding: utf-8 -*-
# Copyright: blackwell.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Whether a run of site.yml is one slice of a sliced AWX job, and the batches it may take.

AWX (and the Automation Platform's controller) can slice a job template: it makes one workflow
job that starts a job per slice, side by side, each an ansible-playbook run of its own on every
Nth host of the inventory. Three promises of site.yml hold for the run that makes them, so a
slice would keep them for its own hosts only: at most ``sglang_rollout_serial`` nodes out at
once (every slice takes batches that size), a failed node stops the rollout (its slice only),
and the router's worker list and the Prometheus targets list every engine (those of the slice).

AWX gives a playbook no variable with the slice's number or count: both are fields of the job,
used to cut the inventory. What it gives every job is its meta variables, and those of a slice
show how it was started: ``awx_job_launch_type`` is ``workflow``, and ``awx_workflow_job_name``
is the job template's own name (``awx_job_template_name``), the name AWX gives the workflow job
it makes for the slices. A workflow of the site's own named after the template looks the same; a
slice relaunched alone runs as a job of its own, beside no other slice, and does not. The count
is the site's to state (``sglang_rollout_slice_count``), and where stated it decides.

``plan`` takes the extra vars (Ansible sizes a play's batches before it reads the inventory, so
the rollout's settings are extra vars, and the plan reads nothing else) and whether the run is a
check. A sliced check runs: it restarts nothing and takes no batches. A sliced converge is
refused unless the site allows it (``sglang_rollout_allow_sliced``) and states the count; then
each slice takes ``sglang_rollout_serial`` divided by the count, rounded down, and a serial
smaller than the count is refused, since a slice cannot take less than one node. In every
sliced run the router's and the Prometheus plays are left out: a slice sees part of the fleet.

Plain Python without Ansible imports: the lookup blackwell.sglang.rollout_slicing calls it (the
first play of site.yml, the node play's batch size, the router's and Prometheus' plays), and the
unit tests call it directly.
"""
from __future__ import annotations

import re

from ansible_collections.blackwell.sglang.plugins.plugin_utils import settings as settings_table

# The settings the plan reads, all extra vars; the table judges the site's own two first.
ALLOW = "sglang_rollout_allow_sliced"
COUNT = "sglang_rollout_slice_count"
SERIAL = "sglang_rollout_serial"
# AWX's meta variables of a job (the awx_ prefix; AWX sets each under tower_ too).
LAUNCH_TYPE = "awx_job_launch_type"
WORKFLOW_NAME = "awx_workflow_job_name"
TEMPLATE_NAME = "awx_job_template_name"
NAMES = (ALLOW, COUNT, SERIAL, LAUNCH_TYPE, WORKFLOW_NAME, TEMPLATE_NAME)

LEFT_OUT = ("the router's worker list and the Prometheus targets {verb}, as a slice holds part of the fleet;"
            " run blackwell.sglang.router and blackwell.sglang.prometheus as one job without slices")


def started_as_a_slice(extra_vars):
    """The job template's name where AWX's meta variables show a slice of a sliced job (started
    by a workflow job named after the template), else ''."""
    template = str(extra_vars.get(TEMPLATE_NAME) or "")
    if (str(extra_vars.get(LAUNCH_TYPE) or "") == "workflow" and template
            and str(extra_vars.get(WORKFLOW_NAME) or "") == template):
        return template
    return ""


def _whole(value):
    """A whole number of nodes as Ansible's serial reads one (an int, or its digits), else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and re.fullmatch(r"\s*[0-9]+\s*", value):
        return int(value)
    return None


def leaves_out(router_urls=None, routers=None, targets_path=None):
    """Whether a slice leaves anything out for a host: a router it runs behind (its
    sglang_service_router_urls), a router host in the slice's inventory (the group sglang_router),
    or the Prometheus targets the whole run writes (sglang_prometheus_sd_path). Without any of
    them the slice checks all that one job over the fleet checks for that host."""
    return bool(router_urls) or bool(routers) or bool(str(targets_path or "").strip())


def plan(extra_vars, check_mode=False, left_out=True):
    """What the rollout does about slicing.

    ``extra_vars``: the run's extra vars (name to value); ``check_mode``: the run is a check.
    Returns ``sliced`` (this run is one slice of several), ``serial`` (the batch size of the node
    play's converge: sglang_rollout_serial as given, or this slice's share), ``note`` (what a
    sliced run leaves out, for the drift report; '' unsliced) and ``problems`` (the refusals,
    each a sentence starting ``preflight:``; empty when the run may go on).
    """
    extra_vars = extra_vars or {}
    serial = extra_vars.get(SERIAL, 1)
    out = {"sliced": False, "serial": serial, "note": "", "problems": []}
    own = {name: extra_vars[name] for name in (ALLOW, COUNT) if name in extra_vars}
    found = settings_table.problems(own, {name: settings_table.TABLE[name] for name in (ALLOW, COUNT)})
    if found:
        out["problems"] = [f"preflight: {message}" for message in found]
        return out

    count = _whole(own.get(COUNT))
    template = started_as_a_slice(extra_vars)
    if count is not None:
        out["sliced"] = count > 1
        seen = f"{COUNT} is {count}"
    else:
        out["sliced"] = bool(template)
        seen = (f"AWX started it from a workflow job named after its job template ({template!r}), as it"
                " starts each slice of a sliced job template")
    if not out["sliced"]:
        return out

    if check_mode:
        if left_out:
            out["note"] = (f"this check is one slice of a sliced AWX job ({seen}): "
                           + LEFT_OUT.format(verb="were not checked") + ".")
        return out
    if not settings_table.truthy(own.get(ALLOW, False)):
        out["problems"] = [
            f"preflight: this converge is one slice of a sliced AWX job: {seen}. Each slice would roll out"
            " on its own, side by side with the others: batches of sglang_rollout_serial nodes in every"
            " slice at once, a failed node stopping its own slice only, and the router's workers and the"
            " Prometheus targets known from its own hosts only. Run the converge as one job (the job"
            " template's job slicing at 1), or as one job per group, one after the other, each limited to"
            " its group (--limit); a check (--check) may be sliced. A site that accepts the risk sets"
            f" {ALLOW}: true and {COUNT} as extra vars."]
        return out
    if count is None:
        out["problems"] = [
            f"preflight: this converge is one slice of a sliced AWX job ({seen}) and {ALLOW} is true, but"
            f" AWX does not tell a playbook how many slices run beside it: set {COUNT} to the job template's"
            " slice count (an extra var), and each slice takes batches of sglang_rollout_serial divided by"
            " it."]
        return out
    total = _whole(serial)
    if total is None or total < 1:
        out["problems"] = [
            f"preflight: {SERIAL} must be a whole number of nodes, 1 or more, for a sliced converge, which"
            f" divides it among the slices; got {str(serial)!r}."]
        return out
    if total < count:
        out["problems"] = [
            f"preflight: {SERIAL} is {total} and {COUNT} {count}: a slice takes at least one node at a"
            f" time, so {count} slices side by side could take {count} nodes out at once. Set {SERIAL} to"
            f" {count} or more, or slice the job template into at most {total} jobs."]
        return out
    out["serial"] = total // count
    out["note"] = (f"this converge is one slice of a sliced AWX job ({seen}): batches of {out['serial']}"
                   f" nodes ({SERIAL} {total} divided among {count} slices); "
                   + LEFT_OUT.format(verb="were left as they were") + ".")
    return out
