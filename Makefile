.PHONY: test lab lab-down bootstrap

bootstrap:
	bash tools/bootstrap.sh

test:
	bash tools/test.sh
