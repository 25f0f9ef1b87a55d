"""blackwell.sglang.template_sha1 and blackwell.sglang.rendered against what ansible.builtin.template
writes: the same template rendered by each on localhost, for the template features the roles'
templates use (the managed header, blocks under trim_blocks, an include, backslashes, text
without a final newline, the extra template variables) and for each role template the roles
compare through them."""
from __future__ import annotations

import hashlib

from conftest import ROOT, local_play_tasks

TEMPLATE = r"""{{ ansible_managed | comment }}
# {{ greeting }} from {{ template_path | basename }}
{% for word in words %}
- {{ word | to_json }}
{% endfor %}
{% if flag %}
Environment="PATH=C:\path\with\backslashes" naïve
{% endif %}
{% include 'part.j2' %}
last line without a newline: {{ extra | default('none') }}"""


def rendered_and_looked_up(tmp_path, template: str, template_vars: dict, play_vars: dict) -> tuple[str, str]:
    out = tmp_path / "out.txt"
    tasks = local_play_tasks(tmp_path, [{
        "hosts": "localhost", "gather_facts": False, "vars": play_vars,
        "tasks": [
            {"name": "write", "ansible.builtin.template": {"src": template, "dest": str(out)}, "vars": template_vars},
            {"name": "checksum", "ansible.builtin.debug": {
                "msg": "{{ lookup('blackwell.sglang.template_sha1', '%s', template_vars=%r) }}" % (template, template_vars)}},
            {"name": "text", "ansible.builtin.debug": {
                "msg": "{{ lookup('blackwell.sglang.rendered', '%s', template_vars=%r) | hash('sha1') }}" % (template, template_vars)}},
        ]}])
    results = dict(tasks)
    # The text the rendered lookup returns is the written file, byte for byte.
    assert results["text"]["msg"] == results["checksum"]["msg"]
    return hashlib.sha1(out.read_bytes()).hexdigest(), results["checksum"]["msg"]


def test_the_checksum_is_that_of_the_file_the_template_module_writes(tmp_path):
    (tmp_path / "t.j2").write_text(TEMPLATE, encoding="utf-8")
    (tmp_path / "part.j2").write_text("included {{ greeting }}\n", encoding="utf-8")
    play_vars = {"greeting": "hello", "words": ["--model-path", "/models/a b", "--tp-size", "8"], "flag": True}
    written, looked_up = rendered_and_looked_up(tmp_path, str(tmp_path / "t.j2"), {"extra": "from template_vars"}, play_vars)
    assert looked_up == written
    # Another value gives another checksum, and still the written file's.
    written2, looked_up2 = rendered_and_looked_up(tmp_path, str(tmp_path / "t.j2"), {}, dict(play_vars, flag=False))
    assert looked_up2 == written2 != written


def test_each_role_template_the_roles_compare_is_rendered_as_written(tmp_path):
    # The variables the templates read, as a node of the lab would have them.
    play_vars = {
        "cuda13_home": "/usr/local/cuda", "cuda13_repo_keyring_path": "/etc/apt/keyrings/cuda-archive-keyring.asc",
        "__cuda13_repo": {"url": "file:///srv/cuda-repo/debian12/x86_64/"},
        "sglang_install_version": "0.5.8", "sglang_install_extras": ["a", "b"], "sglang_install_extra_packages": ["uv==0.9.9"],
        "sglang_install_requirements_lock": "", "sglang_install_constraints": ["numpy<3"],
        "sglang_install_index_url": "", "sglang_install_extra_index_urls": ["https://mirror.example/simple"],
        "sglang_install_find_links": ["/srv/wheelhouse"], "sglang_install_no_index": True,
    }
    for role, template in (("cuda13", "cuda13.sh.j2"), ("cuda13", "cuda13.conf.j2"), ("cuda13", "cuda.sources.j2"),
                           ("sglang_install", "requirements.txt.j2"), ("sglang_install", "constraints.txt.j2"),
                           ("sglang_install", "sources.conf.j2"), ("sglang_install", "sources.toml.j2"),
                           ("sglang_install", "uv-sources.conf.j2")):
        path = str(ROOT / "roles" / role / "templates" / template)
        written, looked_up = rendered_and_looked_up(tmp_path, path, {}, play_vars)
        assert looked_up == written, template


def test_uv_sources_are_the_pip_sources_without_the_extra_indexes(tmp_path):
    """uv-sources.conf.j2 renders sources.conf.j2 for uv's own install: the same file the role
    wrote from sources.conf.j2 with its bootstrap variable, so a node converged before keeps it."""
    play_vars = {"sglang_install_index_url": "https://mirror.example/simple",
                 "sglang_install_extra_index_urls": ["https://extra.example/simple"],
                 "sglang_install_find_links": ["/srv/wheelhouse"]}
    templates = ROOT / "roles" / "sglang_install" / "templates"
    uv = rendered_and_looked_up(tmp_path, str(templates / "uv-sources.conf.j2"), {}, play_vars)
    before = rendered_and_looked_up(tmp_path, str(templates / "sources.conf.j2"),
                                    {"__sglang_install_uv_bootstrap": True}, play_vars)
    full = rendered_and_looked_up(tmp_path, str(templates / "sources.conf.j2"), {}, play_vars)
    assert uv[0] == uv[1] == before[0] != full[0]
