# The front door: two commands. Everything else lives in tools/scripts and meson.
#   make run    install what is missing, build, start openlaked on its embedded default
#   make test   install what is missing, build, run every test suite
.PHONY: run test clean

run:
	@tools/scripts/run.sh

test:
	@tools/scripts/test.sh

clean:
	rm -rf build build-asan build-clang build-fuzz build-tsan build-bench
