.PHONY: test lab lab-down bootstrap

bootstrap:
	bash tools/bootstrap.sh

lab:
	bash tools/lab/lab.sh up

lab-down:
	bash tools/lab/lab.sh down

test:
	bash tools/test.sh
