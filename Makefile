# jgpy: `make demo` and `make test` work on a fresh machine. Every target creates/uses .venv and is idempotent.
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
VPY := $(VENV)/bin/python
JAR ?= /usr/share/java/jgroups.jar
CLASSES := interop/build/classes
JAVA_SRC := $(shell find interop/src -name '*.java' 2>/dev/null)
PYTEST_ARGS ?=
# two pytest workers (pytest-xdist), each test file on one of them: most tests wait on timers and peers
TEST_WORKERS ?= 2

# `make fuzz`: FUZZ_RUNS inputs in all over FUZZ_JOBS processes against every decode entry point, with the
# Cython core compiled by clang (libFuzzer coverage of the generated C, AddressSanitizer); findings go to
# tests/fuzz_regressions/ (see fuzz/campaign.py). `make test` runs a short campaign (tests/test_fuzz.py).
FUZZ_RUNS ?= 10000000
FUZZ_JOBS ?= 2
ATHERIS_VERSION ?= 3.0.0

.PHONY: all demo test test-quick typecheck lint-imports bench soak wheel sdist build deps java-peer jms-broker interop clean \
	distclean fuzz fuzz-deps

all: build

$(VPY):
	$(PYTHON) -m venv $(VENV)
	$(VPY) -m pip install -q --upgrade pip

$(VENV)/.deps: requirements-dev.txt | $(VPY)
	$(VPY) -m pip install -q -r requirements-dev.txt
	touch $@

deps: $(VENV)/.deps

# jgpy installed into the checkout's own venv (editable: this tree, built in place), so `.venv/bin/python
# my_script.py` imports it from any directory; a venv given from outside (VENV=...) is left as it is
ifeq ($(abspath $(VENV)),$(CURDIR)/.venv)
EDITABLE := $(VENV)/.editable
endif

$(VENV)/.editable: setup.py pyproject.toml | $(VENV)/.deps
	$(VPY) -m pip install -q --no-deps --no-build-isolation -e .
	touch $@

# compile the Cython core in place (cythonize and the compiler only redo what changed)
build: deps $(EDITABLE)
	$(VPY) setup.py -q build_ext --inplace

# the Java peer: a JDK and Debian's JGroups 2.12.2 jar, with BeanShell (bsh.xml) and ping (FD_PING's command)
# (installed when missing and we are root)
java-peer:
	@if ! command -v javac >/dev/null 2>&1 || [ ! -f $(JAR) ] || [ ! -f /usr/share/java/bsh.jar ] || ! command -v ping >/dev/null 2>&1; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "installing the Java peer: default-jdk-headless libjgroups-java libbsh-java iputils-ping"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq default-jdk-headless libjgroups-java libbsh-java iputils-ping >/dev/null; \
	  elif [ "$${CI:-}" = "true" ]; then \
	    echo "CI=true but the Java peer (javac + $(JAR)) is missing and we are not root to install it" >&2; exit 1; \
	  else \
	    echo "NOTE: no Java peer; interop tests will be skipped. Install: sudo apt-get install -y default-jdk-headless libjgroups-java"; \
	  fi; \
	fi

# the message broker of the JMS transport's tests (tests/test_jms.py): Debian's ActiveMQ, run by the tests themselves
# (a private broker on free ports); its package's own service is not needed
ACTIVEMQ_JAR ?= /usr/share/activemq/bin/activemq.jar
jms-broker:
	@if [ ! -f $(ACTIVEMQ_JAR) ]; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "installing the JMS tests' broker: activemq"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq activemq >/dev/null; \
	  elif [ "$${CI:-}" = "true" ]; then \
	    echo "CI=true but ActiveMQ ($(ACTIVEMQ_JAR)) is missing and we are not root to install it" >&2; exit 1; \
	  else \
	    echo "NOTE: no ActiveMQ; the JMS tests will be skipped. Install: sudo apt-get install -y activemq"; \
	  fi; \
	fi

$(CLASSES)/.stamp: $(JAVA_SRC) | java-peer
	@if command -v javac >/dev/null 2>&1 && [ -f $(JAR) ]; then \
	  mkdir -p $(CLASSES) && javac -nowarn -Xlint:-options -encoding UTF-8 -d $(CLASSES) -cp $(JAR) $(JAVA_SRC) && touch $@; \
	fi

interop: $(CLASSES)/.stamp

# every tier (tests/conftest.py: unit, interop, spark, processes, slow); CI=true makes a missing Java peer, pyarrow,
# Spark or ActiveMQ a failure
test: build interop jms-broker typecheck lint-imports
	$(VPY) -m pytest tests --durations=20 -n $(TEST_WORKERS) --dist loadfile $(PYTEST_ARGS)

# the unit tier only: in-process tests without Java, Spark or processes (under two minutes on two cores)
test-quick: build typecheck lint-imports
	$(VPY) -m pytest tests -m unit --durations=10 -n $(TEST_WORKERS) --dist loadfile $(PYTEST_ARGS)

# mypy, strict, on the public modules and the .pyi stubs (pyproject.toml), and stubtest: each stub against its
# compiled module (a name, parameter or default that differs fails)
# (listed when the recipe runs: the build generates headers.pyi)
STUBBED = $(patsubst jgpy/_core/%.pyi,jgpy._core.%,$(wildcard jgpy/_core/*.pyi))
typecheck: build
	$(VPY) -m mypy
	$(VPY) -m mypy.stubtest --concise --mypy-config-file pyproject.toml \
	  --allowlist tests/typecheck/stubtest-allowlist.txt $(STUBBED)

# the layers of docs/ARCHITECTURE.md (import-linter contracts in pyproject.toml, Cython modules included)
lint-imports: deps
	$(VENV)/bin/lint-imports --no-cache

demo: build interop
	$(VPY) -m jgpy demo

# clang with its libFuzzer/ASan runtimes (apt, as root), and atheris built from source by that clang: only such a
# build has asan_with_fuzzer.so, the ASan runtime with libFuzzer in it that instrumented extensions need
fuzz-deps: deps
	@if ! command -v clang >/dev/null 2>&1 || ! ls "$$(clang -print-resource-dir)"/lib/linux/libclang_rt.fuzzer_no_main-*.a >/dev/null 2>&1; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "installing clang and its libFuzzer/ASan runtimes: clang libclang-rt-dev"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq clang libclang-rt-dev >/dev/null; \
	  else \
	    echo "make fuzz needs clang with libclang-rt (sudo apt-get install -y clang libclang-rt-dev)" >&2; exit 1; \
	  fi; \
	fi
	@if ! $(VPY) -c "import atheris, os, sys; sys.exit(not os.path.exists(os.path.join(atheris.path(), 'asan_with_fuzzer.so')))" 2>/dev/null; then \
	  echo "building atheris $(ATHERIS_VERSION) from source with clang (a few minutes)"; \
	  CLANG_BIN="$$(command -v clang)" CC=clang CXX=clang++ $(VPY) -m pip install -q --force-reinstall --no-deps \
	    --no-binary atheris "atheris==$(ATHERIS_VERSION)"; \
	fi

fuzz: fuzz-deps build
	$(VPY) -m fuzz.campaign build
	$(VPY) -m fuzz.campaign run --native --runs $(FUZZ_RUNS) --jobs $(FUZZ_JOBS)

# the raw loopback limit (sendmmsg/recvmmsg in C), the yardstick of the end-to-end benchmarks
build/rawlimit: benchmarks/rawlimit.c
	@mkdir -p build
	$(CC) -O2 -Wall -pthread -o $@ $<

bench: build interop build/rawlimit
	$(VPY) benchmarks/run.py

# a mixed Java/jgpy cluster under a nemesis (kill -9 and restart, partitions, loss), journals checked by PySpark;
# not part of `make test` (SOAK_MINUTES, SOAK_MEMBERS: J = Java, p = jgpy process)
SOAK_MINUTES ?= 20
SOAK_MEMBERS ?= J,J,p,p
soak: build interop
	$(VPY) benchmarks/soak.py --minutes $(SOAK_MINUTES) --members $(SOAK_MEMBERS)

# the sdist and manylinux2014 wheels (glibc 2.17: Zig's clang as the compiler, checked by auditwheel) built from
# it, in wheelhouse/; WHEEL_ARCHS="x86_64 aarch64" cross-builds the aarch64 wheel too; the build runs in an
# isolated environment with the sdist's declared build dependencies (WHEEL_FLAGS=--no-isolation: this venv's)
WHEEL_ARCHS ?= $(shell uname -m)
WHEEL_FLAGS ?=
wheel: deps
	$(VPY) scripts/build_wheel.py --out wheelhouse $(addprefix --arch ,$(WHEEL_ARCHS)) $(WHEEL_FLAGS)
	@ls -1 wheelhouse/

sdist: deps
	$(VPY) -m build --sdist -o wheelhouse $(filter --no-isolation,$(WHEEL_FLAGS)) .

clean:
	rm -rf build dist wheelhouse interop/build .pytest_cache .benchmarks .mypy_cache
	find jgpy -name '*.so' -delete -o -name '*.c' -path 'jgpy/_core/*' -delete
	find . -name __pycache__ -prune -exec rm -rf {} +

distclean: clean
	rm -rf $(VENV)
