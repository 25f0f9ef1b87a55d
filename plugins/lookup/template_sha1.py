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
  - Renders each template file the way the M(ansible.builtin.template) action renders it (the
    task's variables with the template variables C(ansible_managed), C(template_path) and the
    others added, C(trim_blocks) on, C(lstrip_blocks) off, C(\n) line ends) and returns the
    SHA-1 of the result, the checksum M(ansible.builtin.copy) and M(ansible.builtin.template)
    compare with the file on the node.
  - Task options of the template action that change the output (C(lstrip_blocks),
    C(newline_sequence), other delimiters) are not taken into account, so compare only with files
    a template task writes with the defaults.
  - The collection's roles compare it with the checksum their one read of the node returned,
    and skip a template task whose file already matches, or end the role on a node where every
    file does.
  - Unlike the M(ansible.builtin.template) lookup it renders on a shallow copy of the variables,
    as the template action does, instead of a deep copy of every variable of the host for each
    file; a check of a fleet compares several files per node.
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
import os

from ansible.errors import AnsibleLookupError
from ansible.module_utils.common.text.converters import to_bytes
from ansible.plugins.lookup import LookupBase
from ansible.template import generate_ansible_template_vars, trust_as_template


class LookupModule(LookupBase):

    def run(self, terms, variables=None, **kwargs):
        self.set_options(var_options=variables, direct=kwargs)
        variables = variables or {}
        checksums = []
        for term in terms:
            source = self.find_file_in_search_path(variables, 'templates', term)
            if not source:
                raise AnsibleLookupError("the template file %s could not be found" % term)
            data = trust_as_template(self._loader.get_text_file_contents(source))
            # The template action's search path: the play's, the playbook's directory and the
            # template's own, each also with templates/ (for includes).
            searchpath = []
            for path in list(variables.get('ansible_search_path', [])) + [self._loader.get_basedir(), os.path.dirname(source)]:
                searchpath.extend([os.path.join(path, 'templates'), path])
            template_vars = dict(variables)
            for name, value in generate_ansible_template_vars(term, fullpath=source).items():
                if name != 'ansible_managed' or name not in template_vars:
                    template_vars[name] = value
            template_vars.update(self.get_option('template_vars'))
            templar = self._templar.copy_with_new_env(available_variables=template_vars, searchpath=searchpath)
            rendered = templar.template(data, escape_backslashes=False,
                                        overrides=dict(trim_blocks=True, lstrip_blocks=False, newline_sequence='\n'))
            checksums.append(hashlib.sha1(to_bytes(rendered, errors='surrogate_or_strict')).hexdigest())
        return checksums
