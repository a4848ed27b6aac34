# zinc: the two commands of the README, plus the usual targets.
#   make          build into build/ (library, zinc-run, zinc-perf, zinc-info, tests)
#   make demo     build, then run the local multi-rank benchmark (4 ranks, checked)
#   make test     build with warnings as errors, then run the test suite, the sanitizer build
#                 of it, and a Release build with clang (built, not run)
# Missing Debian packages are installed first when run as root.

BUILD ?= build
SANBUILD ?= build-san
RELBUILD ?= build-release
JOBS ?= $(shell nproc)
CMAKE_FLAGS ?=
# Warnings are errors for developers and CI (make test sets WERROR=ON), not in a user's build:
# a newer compiler's new warning must not stop it. Passed every time, so that a build directory
# that `make test` configured goes back to OFF with a plain `make`.
WERROR ?= OFF
PREFIX ?= /usr/local
DEMO_RANKS ?= 4

.PHONY: all build deps demo test test-san install format clean

all: build

deps:
	@scripts/deps.sh build

build: deps
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DZINC_WERROR=$(WERROR) $(CMAKE_FLAGS) >/dev/null
	@cmake --build $(BUILD) -j $(JOBS)

demo: build
	$(BUILD)/bin/zinc-run -n $(DEMO_RANKS) --timeout 600 $(BUILD)/bin/zinc-perf all_reduce -b 8 -e 8M -f 4 -c 1
	$(BUILD)/bin/zinc-run -n $(DEMO_RANKS) --timeout 600 $(BUILD)/bin/zinc-perf all_gather -b 8 -e 8M -f 8 -c 1

test:
	@scripts/deps.sh test
	@$(MAKE) --no-print-directory build WERROR=ON
	@scripts/run-tests.sh $(BUILD) $(SANBUILD) $(RELBUILD)

install: build
	cmake --install $(BUILD) --prefix $(PREFIX)

format:
	clang-format -i $$(git ls-files '*.c' '*.h' '*.cu' '*.cuh' '*.cc')

clean:
	rm -rf $(BUILD) $(SANBUILD) $(RELBUILD)
