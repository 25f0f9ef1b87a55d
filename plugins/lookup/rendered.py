# -*- coding: utf-8 -*-
# Copyright: (c) 2026, blackwell.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
name: rendered
short_description: Templates rendered as ansible.builtin.template would write them
version_added: 0.1.0
author:
  - blackwell.sglang maintainers (@blackwell-sglang)
description:
  - Renders each template file the way the M(ansible.builtin.template) action renders it and
    returns the text.
  - A role renders its files once with it; the text is both what its plan compares with the
    node's checksum and what M(ansible.builtin.copy) writes, so a file never differs from what
    was judged.
extends_documentation_fragment:
  - blackwell.sglang.rendering
seealso:
  - plugin: blackwell.sglang.template_sha1
    plugin_type: lookup
  - module: ansible.builtin.copy
"""

EXAMPLES = r"""
- name: Write what the plan rendered
  ansible.builtin.copy:
    content: "{{ lookup('blackwell.sglang.rendered', 'cuda13.sh.j2') }}"
    dest: /etc/profile.d/cuda13.sh
    mode: "0644"
"""

RETURN = r"""
_raw:
  description: The text of each rendered template, in the order given.
  type: list
  elements: str
"""

from ansible.plugins.lookup import LookupBase

from ansible_collections.blackwell.sglang.plugins.plugin_utils.templates import render


class LookupModule(LookupBase):

    def run(self, terms, variables=None, **kwargs):
        self.set_options(var_options=variables, direct=kwargs)
        return render(self, terms, variables, self.get_option('template_vars'))
