# -*- coding: utf-8 -*-
# Copyright: blackwell.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the sglang_model role stages, decided from its settings alone.

``rows`` turns the role's settings (without their ``sglang_model_`` prefix) into one row per
model to stage: the model, then EAGLE-3's draft model when one is declared (a repository id or
a source path). Each row has a label for messages, the fact its staged path is published as,
where it comes from, and ``path_dest``: where a path-mode copy or link goes (its own ``dest``,
else ``models_dir``/<the source's name>). Pure Python, no Ansible imports: the filter
sglang_model_rows calls it, the unit tests too.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import posixpath


def _text(value):
    return "" if value is None else str(value)


def path_dest(dest, source_path, models_dir):
    """A path-mode model's destination: its own, or models_dir/<the source's name>."""
    if _text(dest):
        return _text(dest)
    return _text(models_dir).rstrip("/") + "/" + posixpath.basename(_text(source_path).rstrip("/"))


def rows(settings):
    """The models to stage, the model first."""
    models = [{"label": "model", "fact": "sglang_model_staged_path",
               "repo_id": _text(settings["repo_id"]), "revision": settings["revision"],
               "source_path": _text(settings["source_path"]), "dest": _text(settings["dest"]),
               "expected_files": list(settings["expected_files"] or []),
               "allow_patterns": list(settings["allow_patterns"] or [])}]
    if _text(settings["draft_repo_id"]) or _text(settings["draft_source_path"]):
        models.append({"label": "draft model", "fact": "sglang_model_draft_staged_path",
                       "repo_id": _text(settings["draft_repo_id"]), "revision": settings["draft_revision"],
                       "source_path": _text(settings["draft_source_path"]), "dest": _text(settings["draft_dest"]),
                       "expected_files": [], "allow_patterns": []})
    for model in models:
        model["path_dest"] = path_dest(model["dest"], model["source_path"], settings["models_dir"])
    return models
