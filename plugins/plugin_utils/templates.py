# -*- coding: utf-8 -*-
# Copyright: blackwell.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Templates rendered as ansible.builtin.template's action renders them, for the lookups
blackwell.sglang.rendered (the text) and blackwell.sglang.template_sha1 (its SHA-1)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

from ansible.errors import AnsibleLookupError
from ansible.template import generate_ansible_template_vars, trust_as_template


def render(lookup, terms, variables, extra_vars):
    """The text of each template in ``terms`` as the template action writes it: found in the
    role's templates/ first, the task's variables plus the template variables (``ansible_managed``
    only where the task has none), trim_blocks on, lstrip_blocks off, ``\\n`` line ends. ``lookup``
    is the calling lookup plugin (its loader, templar and search path)."""
    variables = variables or {}
    texts = []
    for term in terms:
        source = lookup.find_file_in_search_path(variables, 'templates', term)
        if not source:
            raise AnsibleLookupError("the template file %s could not be found" % term)
        data = trust_as_template(lookup._loader.get_text_file_contents(source))
        # The template action's search path: the play's, the playbook's directory and the
        # template's own, each also with templates/ (for includes).
        searchpath = []
        for path in list(variables.get('ansible_search_path', [])) + [lookup._loader.get_basedir(), os.path.dirname(source)]:
            searchpath.extend([os.path.join(path, 'templates'), path])
        template_vars = dict(variables)
        for name, value in generate_ansible_template_vars(term, fullpath=source).items():
            if name != 'ansible_managed' or name not in template_vars:
                template_vars[name] = value
        template_vars.update(extra_vars or {})
        templar = lookup._templar.copy_with_new_env(available_variables=template_vars, searchpath=searchpath)
        texts.append(templar.template(data, escape_backslashes=False,
                                      overrides=dict(trim_blocks=True, lstrip_blocks=False, newline_sequence='\n')))
    return texts
