"""A role's variables as Ansible itself templates them, for unit tests: the role's
defaults/main.yml and vars/main.yml loaded by Ansible's DataLoader (trusted as templates, as a
role's own files are) and rendered by Ansible's Templar with the collection's filters, under
the overrides a test gives (every path under a temporary root, say). No Jinja context is built
by hand, so a value vars/main.yml derives is tested as the role derives it."""
from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from conftest import ROOT


@lru_cache(maxsize=None)
def _loader():
    from ansible.parsing.dataloader import DataLoader  # pylint: disable=import-outside-toplevel

    return DataLoader()


def _role_file(collection: Path, role: str, kind: str) -> dict:
    path = collection / "roles" / role / kind / "main.yml"
    return _loader().load_from_file(str(path), trusted_as_template=True) or {}


def _templar(collection: Path, role: str, overrides: dict | None):
    from ansible.template import Templar  # pylint: disable=import-outside-toplevel

    variables = {**_role_file(collection, role, "defaults"), **_role_file(collection, role, "vars"),
                 "inventory_hostname": "node-01", "groups": {}, "hostvars": {}, **(overrides or {})}
    return Templar(loader=_loader(), variables=variables), variables


def render(role: str, name: str, overrides: dict | None = None, collection: Path = ROOT):
    """ROLE's variable NAME, templated by Ansible from the role's defaults and vars with
    OVERRIDES on top; the role of COLLECTION, a copy of this one, where given."""
    templar, variables = _templar(collection, role, overrides)
    return templar.template(variables[name])


def render_template(role: str, template: str, overrides: dict | None = None, collection: Path = ROOT) -> str:
    """ROLE's templates/TEMPLATE as Ansible renders it with the role's variables and OVERRIDES."""
    text = (collection / "roles" / role / "templates" / template).read_text(encoding="utf-8")
    return render_expression(role, text, overrides, collection)


def render_expression(role: str, expression: str, overrides: dict | None = None, collection: Path = ROOT):
    """A template of ROLE's tasks (a loop, a condition), rendered as Ansible would with the
    role's variables and OVERRIDES."""
    from ansible.template import trust_as_template  # pylint: disable=import-outside-toplevel

    templar, _variables = _templar(collection, role, overrides)
    return templar.template(trust_as_template(expression))
