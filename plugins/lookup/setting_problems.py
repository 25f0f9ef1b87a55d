# -*- coding: utf-8 -*-
# Copyright: blackwell.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
name: setting_problems
short_description: The settings that would break the files the roles write them into
version_added: 0.1.0
author:
  - blackwell.sglang maintainers (@blackwell-sglang)
description:
  - Judges the collection's settings, as the host's variables give them, against one table of
    where each setting lands (the secrets file, the systemd unit and the launch arguments in it,
    apt sources, pip requirement, constraint and source files, profile.d, ld.so.conf.d) and
    returns one message per wrong setting, naming the setting and what is wrong.
  - Every option of every role has a row, and every value is refused if it holds a line break, a
    carriage return or a NUL byte; each format adds what it forbids (booleans, the words of a
    choice, whole numbers between a lower and an upper bound, release numbers and digests,
    environment variable names and the names that carry secrets or change which code loads,
    account names, absolute paths without whitespace or systemd specifiers, URLs parsed,
    listen addresses, requirement lines that are pip options, the launch flags the role spells
    itself and C(--config) in C(sglang_service_extra_args)).
  - A secret (C(sglang_service_api_key), C(sglang_service_hf_token)) loses one trailing line
    break before it is judged, as the role writes it (filter P(blackwell.sglang.secret_line#filter)); a
    message never holds a secret's value.
  - Runs on the controller and reads nothing from the node. A setting that is not defined is not
    judged. Outside a role (the preflight play) a value that cannot be templated there (built
    from a role default that is not in scope) is skipped, item by item for a list or a mapping,
    and the role's own refusal, which calls this lookup with O(strict) and its defaults in
    scope, judges it.
  - The table is C(plugins/plugin_utils/settings.py); a setting added to a template is one row.
options:
  _terms:
    description: Prefixes of the settings to judge (C(sglang_service_), C(cuda13_)); every setting of the table when none is given.
    type: list
    elements: str
  prefix:
    description: The word each message starts with (the role's name, or C(preflight)).
    type: str
    default: ""
  strict:
    description: Fail, naming the setting, when a value cannot be templated, instead of skipping it.
    type: bool
    default: false
seealso:
  - plugin: blackwell.sglang.secret_line
    plugin_type: filter
"""

EXAMPLES = r"""
- name: Refuse settings that would break the unit or the secrets file
  ansible.builtin.fail:
    msg: "{{ __problems | join(' ') }}"
  when: __problems | length > 0
  vars:
    __problems: "{{ query('blackwell.sglang.setting_problems', 'sglang_service_', prefix='sglang_service') }}"
"""

RETURN = r"""
_raw:
  description: One message per wrong setting, in the table's order; empty when all are right.
  type: list
  elements: str
"""

from ansible.errors import AnsibleError, AnsibleLookupError
from ansible.plugins.lookup import LookupBase

from ansible_collections.blackwell.sglang.plugins.plugin_utils.settings import CONTEXT, TABLE, problems

_UNREADABLE = object()


class LookupModule(LookupBase):

    def _value(self, name, value, strict):
        """The templated value; a list or mapping that cannot be templated whole keeps the items
        that can (outside strict mode), so one unreadable item hides no other."""
        try:
            return self._templar.template(value)
        except AnsibleError as exc:
            if strict:
                raise AnsibleLookupError("setting_problems: cannot read %s: %s" % (name, exc))
            if isinstance(value, dict):
                items = {key: self._value(name, item, strict) for key, item in value.items()}
                return {key: item for key, item in items.items() if item is not _UNREADABLE}
            if isinstance(value, (list, tuple)):
                return [item for item in (self._value(name, item, strict) for item in value) if item is not _UNREADABLE]
            return _UNREADABLE

    def run(self, terms, variables=None, **kwargs):
        self.set_options(var_options=variables, direct=kwargs)
        variables = variables or {}
        prefixes = tuple(terms) or ("",)
        strict = self.get_option('strict')
        values = {}
        for name in TABLE:
            # Read by the formats of every role's settings, whatever the prefixes.
            if not (name.startswith(prefixes) or name in CONTEXT) or name not in variables:
                continue
            value = self._value(name, variables[name], strict)
            if value is not _UNREADABLE:
                values[name] = value
        lead = self.get_option('prefix')
        return [("%s: %s" % (lead, message)) if lead else message for message in problems(values)]
