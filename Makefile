.PHONY: test check scenario lab lab-down bootstrap

bootstrap:
	bash tools/bootstrap.sh

lab:
	bash tools/lab/lab.sh up

lab-down:
	bash tools/lab/lab.sh down

# Everything, as CI runs it (.ci/run).
test:
	bash tools/test.sh

# The inner loop: lint, sanity, the docs and venv checks and the unit tests; no container.
check:
	bash tools/test.sh tests/test_lint.py tests/test_sanity.py tests/test_docs.py tests/test_venvs.py tests/unit

# One molecule scenario alone, e.g. `make scenario S=cuda13` (the names: ls molecule/).
scenario:
	@test -n "$(S)" -a -f "molecule/$(S)/molecule.yml" || { \
	  echo "make scenario: name one of: $$(cd molecule && ls */molecule.yml | cut -d/ -f1 | tr '\n' ' ')as S=NAME" >&2; exit 2; }
	bash tools/test.sh -n 0 "tests/test_molecule.py::test_molecule_scenario[$(S)]"
