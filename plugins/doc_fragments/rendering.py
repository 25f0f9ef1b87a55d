# -*- coding: utf-8 -*-
# Copyright: (c) 2026, blackwell.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type


class ModuleDocFragment(object):
    # The options of the lookups that render templates as the template action does
    # (blackwell.sglang.rendered, blackwell.sglang.template_sha1: plugins/plugin_utils/templates.py).
    DOCUMENTATION = r"""
options:
  _terms:
    description: Template files, found as the M(ansible.builtin.template) lookup finds them (the role's C(templates/) first).
    type: list
    elements: str
    required: true
  template_vars:
    description: Variables the templates see besides the task's, as the M(ansible.builtin.template) lookup's option of that name.
    type: dict
    default: {}
notes:
  - Templates are rendered as the M(ansible.builtin.template) action renders them - the task's
    variables with the template variables C(ansible_managed), C(template_path) and the others
    added, C(trim_blocks) on, C(lstrip_blocks) off, C(\n) line ends. Task options of the template
    action that change the output (C(lstrip_blocks), C(newline_sequence), other delimiters) are
    not taken into account.
"""
