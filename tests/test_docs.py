"""Documentation: the docs and changelog linters, plugin metadata, README.md's map of the
collection, and each role's README (its sections and its variable table).

The linters run on a copy laid out as ansible_collections/blackwell/sglang. antsibull-docs
checks every plugin's DOCUMENTATION, EXAMPLES and RETURN and every role's argument spec
(schema, markup, references to this collection and to those it depends on);
antsibull-changelog checks the fragments and changelogs/changelog.yaml, and a release made on
the copy shows that it lists the new modules, plugins, roles and playbook by itself.
"""
from __future__ import annotations

import ast
import importlib.util
import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from conftest import COSTS_FILE, ROOT, VENV_BIN, ansible_env, copy_as_collection, task_entries

AUTHOR = "blackwell.sglang maintainers (@blackwell-sglang)"
ROLES = sorted(p.parent.parent.name for p in (ROOT / "roles").glob("*/meta/argument_specs.yml"))
PLUGINS = [path for kind in ("modules", "callback", "filter", "lookup")
           for path in sorted((ROOT / "plugins" / kind).glob("*.py")) if path.name != "__init__.py"]
GALAXY_VERSION = yaml.safe_load((ROOT / "galaxy.yml").read_text(encoding="utf-8"))["version"]

_spec = importlib.util.spec_from_file_location("role_readme", ROOT / "tools" / "role-readme.py")
role_readme = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(role_readme)


def run(args, cwd, env=None):
    return subprocess.run(args, cwd=cwd, env=env or ansible_env(), capture_output=True, text=True, check=False)


def lint_collection_docs(dest: Path):
    # References are checked against this collection and what it depends on (community.general,
    # ansible.builtin); 'all' would load every collection the ansible package bundles, for
    # minutes, to check references this collection does not make.
    return run(
        [str(VENV_BIN / "antsibull-docs"), "lint-collection-docs", "--plugin-docs",
         "--validate-collection-refs", "dependent", "--disallow-unknown-collection-refs", "."],
        cwd=dest, env=ansible_env(ANSIBLE_COLLECTIONS_PATH=str(dest.parents[2])),
    )


# --- antsibull-docs -----------------------------------------------------------------------------

def test_collection_docs_lint_is_clean(tmp_path):
    dest = copy_as_collection(tmp_path)
    proc = lint_collection_docs(dest)
    assert (proc.returncode, proc.stdout + proc.stderr) == (0, "")


def test_collection_docs_lint_reads_modules_and_role_specs(tmp_path):
    """The same lint fails on a broken reference in a module and in a role's argument spec."""
    dest = copy_as_collection(tmp_path)
    module = dest / "plugins" / "modules" / "gpu_facts.py"
    text = module.read_text(encoding="utf-8")
    module.write_text(text.replace("  - Only reads;", "  - See M(blackwell.sglang.no_such_module).\n  - Only reads;", 1),
                      encoding="utf-8")
    spec = dest / "roles" / "sglang_service" / "meta" / "argument_specs.yml"
    text = spec.read_text(encoding="utf-8")
    spec.write_text(text.replace("description: Pass --enable-torch-symm-mem.",
                                 "description: Pass --enable-torch-symm-mem, see O(no_such_option).", 1),
                    encoding="utf-8")
    # The planted line's position in the module's description list (antsibull-docs counts from 1).
    docs = module.read_text(encoding="utf-8").split('DOCUMENTATION = r"""', 1)[1].split('"""', 1)[0]
    planted = next(i for i, line in enumerate(yaml.safe_load(docs)["description"], 1) if "no_such_module" in line)
    proc = lint_collection_docs(dest)
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert proc.stdout.splitlines() == [
        f"plugins/modules/gpu_facts.py:0:0: DOCUMENTATION -> description[{planted}]: "
        "M(blackwell.sglang.no_such_module): there is no module blackwell.sglang.no_such_module",
        "roles/sglang_service/meta/argument_specs.yml:0:0: entry_points -> main -> options -> "
        "sglang_service_torch_symm_mem_enabled -> description[1]: O(no_such_option): option name does "
        "not reference to an existing option of the role blackwell.sglang.sglang_service's entrypoint main",
    ]


# --- plugin metadata ----------------------------------------------------------------------------

def documentation(path: Path) -> dict:
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Assign) and [t.id for t in node.targets if isinstance(t, ast.Name)] == ["DOCUMENTATION"]:
            return yaml.safe_load(node.value.value)
    raise AssertionError(f"{path} has no DOCUMENTATION")


@pytest.mark.parametrize("path", PLUGINS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_plugin_names_one_author_and_its_version_added(path):
    doc = documentation(path)
    assert doc["author"] == [AUTHOR]
    # Every module and plugin is new in a release no later than the collection's own version.
    assert re.fullmatch(r"[0-9]+\.[0-9]+\.[0-9]+", str(doc.get("version_added")))
    assert tuple(map(int, doc["version_added"].split("."))) <= tuple(map(int, GALAXY_VERSION.split(".")))


# --- README.md ----------------------------------------------------------------------------------

# How README.md tells a reader to open each kind of plugin's documentation.
DOC_COMMANDS = {
    "modules": "ansible-doc blackwell.sglang.{}",
    "callback": "ansible-doc -t callback blackwell.sglang.{}",
    "filter": "ansible-doc -t filter blackwell.sglang.{}",
    "lookup": "ansible-doc -t lookup blackwell.sglang.{}",
}


def readme_gaps(readme: str, catalogue: str, roles: list[str], plugins: list[Path]) -> list[str]:
    """What the docs do not point to: README.md without a link to a role's README, the plugin
    catalogue (docs/plugins.md) without the ansible-doc command that shows a plugin's
    documentation."""
    gaps = [f"roles/{role}/README.md: no link to it" for role in roles
            if f"](roles/{role}/README.md)" not in readme]
    for path in plugins:
        command = DOC_COMMANDS[path.parent.name].format(path.stem)
        if f"`{command}`" not in catalogue:
            gaps.append(f"plugins/{path.parent.name}/{path.name}: no `{command}`")
    return gaps


ROLE_NAMES = sorted(p.name for p in (ROOT / "roles").iterdir() if p.is_dir())
CATALOGUE = ROOT / "docs" / "plugins.md"


def test_readme_links_every_role_and_the_catalogue_names_every_plugin():
    gaps = readme_gaps((ROOT / "README.md").read_text(encoding="utf-8"), CATALOGUE.read_text(encoding="utf-8"),
                       ROLE_NAMES, PLUGINS)
    assert gaps == [], "the docs do not point to:\n" + "\n".join(gaps)


README_MAX_LINES = 250
README_MAX_WIDTH = 100
# What an operator does, in the order they do it: each a second-level section of README.md.
README_SECTIONS = ("Install", "Inventory", "Run", "Check", "Remove")


def readme_problems(text: str) -> list[str]:
    """What keeps README.md from being the page an operator reads: too long, too wide, or without
    one of README_SECTIONS in order."""
    lines = text.splitlines()
    problems = [f"{len(lines)} lines, more than {README_MAX_LINES}"] if len(lines) > README_MAX_LINES else []
    problems += [f"line {number}: {len(line)} characters, more than {README_MAX_WIDTH}"
                 for number, line in enumerate(lines, 1) if len(line) > README_MAX_WIDTH]
    headings = [line[3:].strip() for line in lines if line.startswith("## ")]
    found = [name for name in headings if name in README_SECTIONS]
    if found != list(README_SECTIONS):
        problems.append(f"sections {found}, not {list(README_SECTIONS)}")
    return problems


def test_readme_is_short_narrow_and_in_an_operators_order_and_its_pages_resolve():
    """README.md is what an operator reads first: install, inventory, run, check, remove, in at
    most README_MAX_LINES lines of at most README_MAX_WIDTH characters; the plugin catalogue,
    the support evidence and the timings are on pages it links. Every relative link in it and in
    docs/ names a file that exists."""
    readme = ROOT / "README.md"
    assert readme_problems(readme.read_text(encoding="utf-8")) == []
    pages = [readme, *sorted((ROOT / "docs").glob("*.md"))]
    for page in pages[1:]:
        # Linked from the README, or from another page of docs/ that is.
        others = "\n".join(other.read_text(encoding="utf-8") for other in pages[1:] if other != page)
        assert f"](docs/{page.name})" in readme.read_text(encoding="utf-8") or f"]({page.name})" in others, page.name
    broken = []
    for page in pages:
        for target in re.findall(r"\]\(([^)#:]+)(?:#[^)]*)?\)", page.read_text(encoding="utf-8")):
            if not (page.parent / target).exists():
                broken.append(f"{page.relative_to(ROOT)}: {target}")
    assert broken == []


def test_readme_problems_name_a_long_page_a_wide_line_and_a_section_missing_or_out_of_order():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    wide = text.replace("## Install\n", "## Install\n" + "x" * 101 + "\n", 1)
    number = wide.splitlines().index("x" * 101) + 1
    assert readme_problems(wide) == [f"line {number}: 101 characters, more than 100"]
    long = text + "\n" * (README_MAX_LINES - len(text.splitlines()) + 1)
    assert readme_problems(long) == [f"{README_MAX_LINES + 1} lines, more than {README_MAX_LINES}"]
    assert readme_problems(text.replace("## Remove\n", "## Removal\n")) == [
        "sections ['Install', 'Inventory', 'Run', 'Check'], not ['Install', 'Inventory', 'Run', 'Check', 'Remove']"]
    swapped = text.replace("## Check\n", "## TMP\n").replace("## Run\n", "## Check\n").replace("## TMP\n", "## Run\n")
    assert readme_problems(swapped) == [
        "sections ['Install', 'Inventory', 'Check', 'Run', 'Remove'], not ['Install', 'Inventory', 'Run', 'Check', 'Remove']"]


def test_readme_gaps_name_a_role_and_a_plugin_left_out():
    readme = (ROOT / "README.md").read_text(encoding="utf-8").replace(
        "](roles/sglang_model/README.md)", "](roles/sglang_model/)")
    catalogue = CATALOGUE.read_text(encoding="utf-8").replace(
        "`ansible-doc -t filter blackwell.sglang.pcie_findings`", "`pcie_findings`")
    assert readme_gaps(readme, catalogue, ROLE_NAMES, PLUGINS) == [
        "roles/sglang_model/README.md: no link to it",
        "plugins/filter/pcie_findings.py: no `ansible-doc -t filter blackwell.sglang.pcie_findings`",
    ]


# Units of the test run that docs/testing.md lists with their seconds from tests/costs.json.
COSTS_SECTION = "## What each unit takes"
LISTED_FROM = 20


def cost_rows(text: str) -> dict:
    """unit -> seconds, from the table under COSTS_SECTION."""
    section = text.split(COSTS_SECTION, 1)[1].split("\n## ", 1)[0]
    return {m[1]: int(m[2].replace(",", "")) for m in re.finditer(r"^\| `([^`]+)` \| ([\d,]+) \|$", section, re.M)}


def test_testing_page_lists_each_long_units_measured_seconds():
    """docs/testing.md shows what tests/costs.json (the order of the run) holds for every unit of
    LISTED_FROM seconds or more, so the page says what the run last measured."""
    costs = json.loads(COSTS_FILE.read_text(encoding="utf-8"))
    assert cost_rows((ROOT / "docs" / "testing.md").read_text(encoding="utf-8")) == {
        unit: round(cost) for unit, cost in costs.items() if cost >= LISTED_FROM}


# --- antsibull-changelog ------------------------------------------------------------------------

def test_changelog_fragments_and_changelog_yaml_lint_clean():
    proc = run([str(VENV_BIN / "antsibull-changelog"), "lint"], cwd=ROOT)
    assert (proc.returncode, proc.stdout + proc.stderr) == (0, "")
    proc = run([str(VENV_BIN / "antsibull-changelog"), "lint-changelog-yaml", "changelogs/changelog.yaml"], cwd=ROOT)
    assert (proc.returncode, proc.stdout + proc.stderr) == (0, "")


def test_changelog_lint_refuses_an_unknown_section(tmp_path):
    dest = copy_as_collection(tmp_path)
    (dest / "changelogs" / "fragments" / "wrong.yml").write_text(
        "---\nnew_features:\n  - gpu_facts - reads the GPUs.\n", encoding="utf-8")
    proc = run([str(VENV_BIN / "antsibull-changelog"), "lint"], cwd=dest)
    assert (proc.returncode, proc.stdout) == (3, "changelogs/fragments/wrong.yml:0:0: invalid section: new_features\n")


def test_no_fragment_lists_what_the_changelog_generates():
    """New modules and plugins come from version_added; a fragment listing one lists it twice."""
    names = {p.stem for p in PLUGINS}
    listed = []
    for fragment in sorted((ROOT / "changelogs" / "fragments").glob("*.yml")):
        for section, entries in yaml.safe_load(fragment.read_text(encoding="utf-8")).items():
            for entry in entries if section.startswith(("major", "minor")) else []:
                match = re.match(r"(\S+)(?: \w+)? - new (?:[\w-]+ )*?(?:module|plugin|role|playbook)\b", entry)
                if match and match.group(1) in names | set(ROLES):
                    listed.append(f"{fragment.name}: {entry[:60]}")
    assert listed == []


def test_release_lists_new_modules_plugins_roles_and_playbook(tmp_path):
    dest = copy_as_collection(tmp_path)
    # antsibull-changelog asks git which fragments are tracked.
    subprocess.run(["git", "init", "-q"], cwd=dest, check=True)
    subprocess.run(["git", "add", "-A"], cwd=dest, check=True)
    proc = run([str(VENV_BIN / "antsibull-changelog"), "release", "--version", GALAXY_VERSION,
                "--date", "2026-12-01"], cwd=dest, env=ansible_env(ANSIBLE_COLLECTIONS_PATH=str(tmp_path)))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    release = yaml.safe_load((dest / "changelogs" / "changelog.yaml").read_text(encoding="utf-8"))["releases"][GALAXY_VERSION]
    assert sorted(m["name"] for m in release["modules"]) == sorted(p.stem for p in PLUGINS if p.parent.name == "modules")
    assert [p["name"] for p in release["plugins"]["callback"]] == ["drift_report", "gc_freeze"]
    assert [p["name"] for p in release["plugins"]["filter"]] == [
        "cuda13_plan", "cuda13_repository", "engine_sandbox", "mask_urls", "nccl_overrides", "pcie_findings", "release_name",
        "releases_to_prune", "removal_paths", "requirement_hashes", "secret_line", "sglang_install_plan", "sglang_model_rows",
        "sglang_prometheus_targets", "sglang_router_release", "sglang_router_switch", "sglang_router_views", "sglang_router_worker_url",
        "sglang_router_worker_view", "sglang_service_plan", "sglang_service_release", "sglang_service_state",
        "sm120_patch_plan", "sm120_patch_reads", "url_credentials"]
    assert [p["name"] for p in release["plugins"]["lookup"]] == [
        "drift_verdicts", "rendered", "rollout_slicing", "setting_problems", "template_sha1"]
    assert sorted(r["name"] for r in release["objects"]["role"]) == ROLES
    assert [p["name"] for p in release["objects"]["playbook"]] == ["site"]


# --- role READMEs -------------------------------------------------------------------------------

def readme_rows(readme_text: str) -> dict:
    """The variable table of a README, read back without the generator: name -> (type, default)."""
    table = readme_text.split(role_readme.BEGIN, 1)[1].split(role_readme.END, 1)[0]
    rows = {}
    for line in table.strip().splitlines()[2:]:
        cells = [c.strip() for c in re.split(r"(?<!\\)\|", line)[1:-1]]
        rows[cells[0].strip("`")] = (cells[1], cells[2])
    return rows


def table_mismatches(readme_text: str, argument_specs: dict) -> list[str]:
    """What differs between a README's table and the spec's main entry point: names, types, defaults."""
    rows = readme_rows(readme_text)
    options = argument_specs["argument_specs"]["main"].get("options") or {}
    problems = [f"{name}: in the spec, not in the README" for name in options if name not in rows]
    problems += [f"{name}: in the README, not in the spec" for name in rows if name not in options]
    for name, spec in options.items():
        if name not in rows:
            continue
        kind, default = rows[name]
        want_kind = spec.get("type", "str") + (f" of {spec['elements']}" if spec.get("elements") else "")
        if kind != want_kind:
            problems.append(f"{name}: type {kind} in the README, {want_kind} in the spec")
        if spec.get("required") or "default" not in spec:
            want_default = "required" if spec.get("required") else "unset"
            if default != want_default:
                problems.append(f"{name}: default {default} in the README, {want_default} in the spec")
        elif not (default.startswith("`") and yaml.safe_load(default.strip("`")) == spec["default"]):
            problems.append(f"{name}: default {default} in the README, {spec['default']!r} in the spec")
    if [n for n in rows if n in options] != [n for n in options if n in rows]:
        problems.append("the README lists the variables in another order than the spec")
    return problems


@pytest.mark.parametrize("role", ROLES)
def test_role_readme_table_matches_its_argument_spec(role):
    readme = (ROOT / "roles" / role / "README.md").read_text(encoding="utf-8")
    spec = yaml.safe_load((ROOT / "roles" / role / "meta" / "argument_specs.yml").read_text(encoding="utf-8"))
    assert table_mismatches(readme, spec) == []
    assert len(readme_rows(readme)) == len(spec["argument_specs"]["main"]["options"])


def test_role_readmes_are_as_the_generator_writes_them():
    proc = run([str(VENV_BIN / "python"), "tools/role-readme.py", "--check"], cwd=ROOT)
    assert (proc.returncode, proc.stdout + proc.stderr) == (0, "")


# Every role README says what the role does (the text under its title), then has these sections.
ROLE_README_SECTIONS = ("Facts", "Variables", "Example", "Idempotence and check mode", "Tests")


def sections(text: str) -> dict:
    """A README's second-level sections: heading -> the text up to the next one."""
    parts = re.split(r"^## (.+)$", text, flags=re.MULTILINE)
    return dict(zip(parts[1::2], parts[2::2]))


def role_readme_gaps(role: str, text: str) -> list[str]:
    gaps = []
    intro = re.match(rf"# {role}\n(.*?)(?=^## |\Z)", text, re.DOTALL | re.MULTILINE)
    if not intro or len(intro.group(1).split()) < 20:
        gaps.append(f"no '# {role}' title followed by what the role does")
    found = sections(text)
    gaps += [f"no '## {name}' section" for name in ROLE_README_SECTIONS if name not in found]
    example = found.get("Example", "")
    if not re.search(rf"```yaml\n- name: .*?role: blackwell\.sglang\.{role}\n.*?```", example, re.DOTALL):
        gaps.append(f"the Example section has no play that uses blackwell.sglang.{role}")
    named = re.findall(r"`((?:tests|molecule)/[^`\s]+)`", found.get("Tests", ""))
    if not named:
        gaps.append("the Tests section names no test file or scenario")
    gaps += [f"the Tests section names {path}, which does not exist" for path in named
             if not (ROOT / path).exists()]
    return gaps


@pytest.mark.parametrize("role", ROLES)
def test_role_readme_says_what_variables_example_idempotence_and_tests(role):
    text = (ROOT / "roles" / role / "README.md").read_text(encoding="utf-8")
    assert role_readme_gaps(role, text) == []


def test_role_readme_gaps_name_what_is_missing():
    text = (ROOT / "roles" / "sglang_model" / "README.md").read_text(encoding="utf-8")
    text = text.replace("\n## Example\n", "\n## Examples of use\n").replace(
        "`tests/unit/test_model_files.py`", "`tests/unit/test_no_such_file.py`")
    assert role_readme_gaps("sglang_model", text) == [
        "no '## Example' section",
        "the Example section has no play that uses blackwell.sglang.sglang_model",
        "the Tests section names tests/unit/test_no_such_file.py, which does not exist",
    ]


def test_every_role_has_a_readme_and_an_argument_spec():
    assert ROLES == sorted(p.name for p in (ROOT / "roles").iterdir() if p.is_dir())
    for role in ROLES:
        assert (ROOT / "roles" / role / "README.md").is_file(), role


@pytest.fixture()
def role_copy(tmp_path):
    """roles/sglang_install's README and argument spec, copied to edit."""
    role = tmp_path / "roles" / "sglang_install"
    (role / "meta").mkdir(parents=True)
    shutil.copy2(ROOT / "roles" / "sglang_install" / "README.md", role / "README.md")
    shutil.copy2(ROOT / "roles" / "sglang_install" / "meta" / "argument_specs.yml", role / "meta" / "argument_specs.yml")
    return role


def edit_spec(role: Path, change) -> dict:
    path = role / "meta" / "argument_specs.yml"
    spec = yaml.safe_load(path.read_text(encoding="utf-8"))
    change(spec["argument_specs"]["main"]["options"])
    path.write_text(yaml.safe_dump(spec, sort_keys=False), encoding="utf-8")
    return spec


OUT_OF_STEP = ("roles/sglang_install/README.md: the variable table differs from meta/argument_specs.yml; "
               "run tools/role-readme.py\n")


@pytest.mark.parametrize(
    ("change", "found"),
    [
        (lambda o: o.update(sglang_install_timeout={"type": "int", "default": 600, "description": "Seconds."}),
         ["sglang_install_timeout: in the spec, not in the README"]),
        (lambda o: o["sglang_install_version"].update(default="0.5.24"),
         ["sglang_install_version: default `0.5.23` in the README, '0.5.24' in the spec"]),
        (lambda o: o["sglang_install_uv_version"].update(type="raw"),
         ["sglang_install_uv_version: type str in the README, raw in the spec"]),
        (lambda o: o.pop("sglang_install_no_deps"),
         ["sglang_install_no_deps: in the README, not in the spec"]),
    ],
    ids=["variable-added", "default-changed", "type-changed", "variable-removed"],
)
def test_readme_out_of_step_with_its_spec_is_found_and_rewritten(role_copy, change, found):
    readme = role_copy / "README.md"
    before = readme.read_bytes()
    spec = edit_spec(role_copy, change)
    assert table_mismatches(before.decode(), spec) == found

    script = [str(VENV_BIN / "python"), str(ROOT / "tools" / "role-readme.py"), "--roles-dir", str(role_copy.parent)]
    proc = run(script + ["--check"], cwd=ROOT)
    assert (proc.returncode, proc.stdout, proc.stderr) == (1, "", OUT_OF_STEP)
    assert readme.read_bytes() == before

    proc = run(script, cwd=ROOT)
    assert (proc.returncode, proc.stdout) == (0, "roles/sglang_install/README.md: table rewritten\n")
    after = readme.read_text(encoding="utf-8")
    assert table_mismatches(after, spec) == []
    # Only the table changed: the hand-written prose before and after it is kept.
    assert after.split(role_readme.BEGIN)[0] == before.decode().split(role_readme.BEGIN)[0]
    assert after.split(role_readme.END)[1] == before.decode().split(role_readme.END)[1]
    proc = run(script + ["--check"], cwd=ROOT)
    assert (proc.returncode, proc.stdout + proc.stderr) == (0, "")


def test_readme_without_markers_is_refused_and_left_alone(role_copy):
    readme = role_copy / "README.md"
    readme.write_text("# sglang_install\n\nNo table here.\n", encoding="utf-8")
    proc = run([str(VENV_BIN / "python"), str(ROOT / "tools" / "role-readme.py"),
                "--roles-dir", str(role_copy.parent)], cwd=ROOT)
    assert (proc.returncode, proc.stdout) == (1, "")
    assert proc.stderr == (f"roles/sglang_install/README.md: needs exactly one {role_readme.BEGIN!r} "
                           f"and one {role_readme.END!r} line\n")
    assert readme.read_text(encoding="utf-8") == "# sglang_install\n\nNo table here.\n"


# --- each role's contract: the facts it publishes and what it reads from other roles ------------

# A variable of one of the collection's roles, but not a plugin's name (blackwell.sglang.<name>).
ROLE_VARIABLE = re.compile(r"(?<!blackwell\.sglang\.)(?<!\w)((?:%s)_[a-z0-9_]+)" % "|".join(ROLES))


def role_contract(role_dir: Path) -> tuple[set, set]:
    """What a role publishes (the facts its tasks set and the results they register, but the
    private ones, __<role>_...) and the variables of other roles it reads (its defaults, vars,
    tasks, handlers and templates, comments aside)."""
    role = role_dir.name
    published = set()
    for path in sorted([*role_dir.glob("tasks/*.yml"), *role_dir.glob("handlers/*.yml")]):
        for task in task_entries(yaml.safe_load(path.read_text(encoding="utf-8"))):
            names = [task.get("register") or ""]
            facts = task.get("ansible.builtin.set_fact")
            names += list(facts) if isinstance(facts, dict) else []
            # A fact named by a template (sglang_model's, from its plan) is checked below.
            published.update(name for name in names
                             if name and not name.startswith("__") and name != "cacheable" and "{{" not in name)
    if role == "sglang_model":
        plan = (ROOT / "plugins" / "plugin_utils" / "model_plan.py").read_text(encoding="utf-8")
        published.update(re.findall(r'"fact": "([a-z_]+)"', plan))
    read = set()
    for kind in ("defaults", "vars", "tasks", "handlers", "templates"):
        for path in sorted((role_dir / kind).glob("*")):
            for line in path.read_text(encoding="utf-8").splitlines():
                if not line.lstrip().startswith("#"):
                    read.update(name for name in ROLE_VARIABLE.findall(line) if not name.startswith(role + "_"))
    return published, read


def contract_gaps(role_dir: Path, text: str) -> list[str]:
    """What the README's Facts section does not name of the role's contract: what the role
    publishes, in its paragraph starting "Published", and what it reads from other roles, in the
    one starting "Read from other roles". (Reads in the plugins' Python, such as the router's of
    each worker's hostvars, are not found here: the README names them by hand.)"""
    paragraphs = sections(text).get("Facts", "").split("\n\n")

    def named(start: str) -> set:
        return {name for paragraph in paragraphs if paragraph.strip().startswith(start)
                for name in re.findall(r"`([a-z0-9_]+)`", paragraph)}

    published, read = role_contract(role_dir)
    return ([f"publishes {name}, which the Facts section does not name" for name in sorted(published - named("Published"))]
            + [f"reads {name}, which the Facts section does not name"
               for name in sorted(read - named("Read from other roles"))])


@pytest.mark.parametrize("role", ROLES)
def test_each_roles_facts_section_names_what_it_publishes_and_reads(role):
    role_dir = ROOT / "roles" / role
    assert contract_gaps(role_dir, (role_dir / "README.md").read_text(encoding="utf-8")) == []


def test_contract_gaps_name_a_fact_and_a_read_left_out():
    role_dir = ROOT / "roles" / "sglang_service"
    text = (role_dir / "README.md").read_text(encoding="utf-8")
    text = text.replace("`sglang_service_nccl_smoke_report`", "the smoke report").replace("`cuda13_links`", "the links")
    assert contract_gaps(role_dir, text) == [
        "publishes sglang_service_nccl_smoke_report, which the Facts section does not name",
        "reads cuda13_links, which the Facts section does not name"]
    # A name in the other paragraph does not count.
    moved = (role_dir / "README.md").read_text(encoding="utf-8").replace(
        "\n\nRead from other roles, as defaults a play may override: from `cuda13`,",
        " `cuda13_links`.\n\nRead from other roles, as defaults a play may override: from `cuda13`,").replace(
        "and\n`cuda13_links` (switched back", "and\nthe links (switched back")
    assert contract_gaps(role_dir, moved) == ["reads cuda13_links, which the Facts section does not name"]


def shadowed(role_dir: Path) -> list[str]:
    """Task results that shadow a variable of the role: a registered result named like a default
    or a vars/main.yml value (a register outranks both, so every later use of that name reads the
    result), or a fact set over a vars/main.yml value. A fact republishing a default of its own
    name (cuda13_home) is the role's way of publishing that setting."""
    defaults = yaml.safe_load((role_dir / "defaults" / "main.yml").read_text(encoding="utf-8")) or {} \
        if (role_dir / "defaults" / "main.yml").exists() else {}
    derived = yaml.safe_load((role_dir / "vars" / "main.yml").read_text(encoding="utf-8")) or {} \
        if (role_dir / "vars" / "main.yml").exists() else {}
    found = []
    for path in sorted([*role_dir.glob("tasks/*.yml"), *role_dir.glob("handlers/*.yml")]):
        for task in task_entries(yaml.safe_load(path.read_text(encoding="utf-8"))):
            register = task.get("register")
            if register and (register in defaults or register in derived):
                found.append(f"{path.name}: register {register} shadows the role's variable of that name")
            facts = task.get("ansible.builtin.set_fact")
            for name in facts if isinstance(facts, dict) else []:
                if name in derived:
                    found.append(f"{path.name}: set_fact {name} shadows vars/main.yml's {name}")
    return found


@pytest.mark.parametrize("role", ROLES)
def test_no_task_result_shadows_a_variable_of_its_role(role):
    assert shadowed(ROOT / "roles" / role) == []


def test_shadowed_names_a_register_over_the_table(tmp_path):
    role_dir = tmp_path / "sglang_service"
    shutil.copytree(ROOT / "roles" / "sglang_service", role_dir)
    preflight = role_dir / "tasks" / "preflight.yml"
    preflight.write_text(preflight.read_text(encoding="utf-8").replace(
        "register: __sglang_service_read\n", "register: __sglang_service_files\n"), encoding="utf-8")
    assert shadowed(role_dir) == ["preflight.yml: register __sglang_service_files shadows the role's variable of that name"]
