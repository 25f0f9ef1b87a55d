# -*- coding: utf-8 -*-
# Copyright: blackwell.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
name: template_sha1
short_description: The SHA-1 of a template as ansible.builtin.template would write it
version_added: 0.1.0
author:
  - blackwell.sglang maintainers (@blackwell-sglang)
description:
  - Renders each template file the way the M(ansible.builtin.template) action renders it and
    returns the SHA-1 of the result, the checksum M(ansible.builtin.copy) and
    M(ansible.builtin.template) compare with the file on the node. Compare it only with files a
    template task writes with the defaults.
  - The collection's roles compare it with the checksum their one read of the node returned,
    and skip a template task whose file already matches, or end the role on a node where every
    file does.
  - Unlike the M(ansible.builtin.template) lookup it renders on a shallow copy of the variables,
    as the template action does, instead of a deep copy of every variable of the host for each
    file; a check of a fleet compares several files per node.
extends_documentation_fragment:
  - blackwell.sglang.rendering
seealso:
  - module: ansible.builtin.template
  - plugin: ansible.builtin.template
    plugin_type: lookup
"""

EXAMPLES = r"""
- name: Write the unit only where the node's copy differs from what the template renders
  ansible.builtin.template:
    src: sglang.service.j2
    dest: /etc/systemd/system/sglang.service
    mode: "0644"
  when: node_files['/etc/systemd/system/sglang.service'].checksum | default('') != lookup('blackwell.sglang.template_sha1', 'sglang.service.j2')
"""

RETURN = r"""
_raw:
  description: The SHA-1 (hexadecimal) of each rendered template, in the order given.
  type: list
  elements: str
  sample: [19110e7d1b07d2ab261a4e2a7289838463e36fed]
"""

import hashlib

from ansible.module_utils.common.text.converters import to_bytes
from ansible.plugins.lookup import LookupBase

from ansible_collections.blackwell.sglang.plugins.plugin_utils.templates import render


class LookupModule(LookupBase):

    def run(self, terms, variables=None, **kwargs):
        self.set_options(var_options=variables, direct=kwargs)
        return [hashlib.sha1(to_bytes(text, errors='surrogate_or_strict')).hexdigest()
                for text in render(self, terms, variables, self.get_option('template_vars'))]
