# recallbench: two commands on a fresh machine, each installing what it needs into .venv.
#   make eval  - the core install (the project and HotMem, `pip install -e .`, no extras:
#                about 370 MB), then every stage of the fixture suite into build/
#   make test  - the full install (`make setup`), then lint, tests and the strict docs build
#                (what CI runs)
# The full install has everything, optional parts included, so no test is skipped: torch (a
# CPU build, first: on these machines `torch==2.13.0` is found on local disk), the semantic
# and ray extras, the memory stores' extras (chroma, txtai, llamaindex, langgraph, mem0, milvus) and
# the example plugins (examples/plugin-system, LanceDB; examples/plugin-dory, dory-memory;
# examples/plugin-structured, turn pairs). About 3 GB in .venv.
# Each weight has its stamp file; the full one implies the core one, so `make eval` after
# `make test` installs nothing. pip prints its own progress (downloads, builds).
#
# A working copy of the system under test: `make eval STORE=../hotmem-wc` installs that
# HotMem checkout editable into .venv and records it ($(VENV)/.recallbench-store); a later
# install (pyproject.toml changed: `pip install -e .` reinstalls the pinned HotMem) puts it
# back and says so in one line, and every `make eval` prints which HotMem it measures.
# `make eval STORE=index` returns to the pinned release. See docs/did-my-change-help.md.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
BUILD ?= build
#: the full install (every extra, torch, the example plugins) and the core one (no extras)
STAMP := $(VENV)/.recallbench-full
CORE_STAMP := $(VENV)/.recallbench-core
RB := $(BIN)/recallbench --build-dir "$(BUILD)"
#: a HotMem checkout to measure instead of the pinned release (or `index` to go back to it)
STORE ?=
STORE_STAMP := $(VENV)/.recallbench-store
SUT := $(BIN)/python scripts/system_under_test.py --stamp "$(STORE_STAMP)" --distribution hotmem
# Material for MkDocs prints a notice about MkDocs 2.0 on every build; it is not a warning of ours.
export NO_MKDOCS_2_WARNING := 1

.PHONY: setup setup-core eval test test-fast test-portable bench-tests lint docs screenshot baseline bench bench-longmemeval bench-generators bench-working-copy bench-same-results bench-compare bench-embed bench-scale bench-peer bench-large bench-large-full clean

setup: $(STAMP)
setup-core: $(CORE_STAMP)

PIP := $(BIN)/python -m pip install --disable-pip-version-check

# `remember` records an editable HotMem before pip may replace it; `restore` puts it back.
$(CORE_STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	@$(SUT) remember
	$(PIP) -e .
	@$(SUT) restore
	@touch $(CORE_STAMP)

$(STAMP): pyproject.toml examples/plugin-system/pyproject.toml examples/plugin-dory/pyproject.toml examples/plugin-structured/pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	@$(SUT) remember
	$(PIP) 'torch==2.13.0'
	$(PIP) -e '.[dev,docs,semantic,ray,okapi,chroma,txtai,llamaindex,langgraph,mem0,milvus,postgres]' -e examples/plugin-system -e examples/plugin-dory -e examples/plugin-structured
	@$(SUT) restore
	@touch $(STAMP) $(CORE_STAMP)

# The system under test (STORE= installs a working copy; one line names it), the seven
# stages, one command each, in the order `recallbench stages` prints (its one definition is
# recallbench.builddir.artifacts.STAGES), then the TREC export and the baseline gate, which writes the
# block for a pull request (BUILD/baseline-diff.md) and names it when the result differs.
# The core install suffices: HotMem on the fixtures needs none of the extras.
eval: $(CORE_STAMP)
	@$(SUT) use "$(STORE)"
	@set -e; for stage in $$($(BIN)/recallbench stages); do \
	  echo "$(RB) $$stage"; $(RB) $$stage; done
	$(RB) export-trec
	$(RB) check-baseline --markdown "$(BUILD)/baseline-diff.md"
	@echo "results: $(BUILD)/results.json  report: $(BUILD)/report.md and $(BUILD)/report.html  decision: $(BUILD)/decision.json  pull request block: $(BUILD)/baseline-diff.md"

# The suite on two worker processes (pytest-xdist), each taking whole test files, so a file's
# module fixtures are built once and its tests keep their order: the machines here have 2 cores.
# The files go out in collection order (--no-loadscope-reorder: not by test count), which
# tests/conftest.py starts with the slowest files (SLOW_FIRST), so neither worker idles at the end;
# pytest prints the 25 slowest tests at the end (`make bench-tests` for the whole picture).
PYTEST := $(BIN)/pytest -q -n 2 --dist loadfile --no-loadscope-reorder --durations=25

test: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(PYTEST)
	$(MAKE) --no-print-directory test-portable
	$(BIN)/mkdocs build --strict --quiet

# The inner loop: every test but those marked `extras` (a learned embedder, a memory store,
# a server, Ray, the browser: tests/conftest.py), with lint; what it leaves out, `make test` runs.
test-fast: $(STAMP)
	$(BIN)/ruff check .
	$(PYTEST) -m "not extras"

# The tests whose assertions compare a learned embedder's numbers with numbers computed
# another way (marked `embedding`; the rule is in tests/conftest.py), again with other CPU
# kernels than this machine's best (torch's default ATen kernels, MKL limited to AVX2): they
# must not depend on which kernels ran.
PORTABLE_KERNELS := ATEN_CPU_CAPABILITY=default MKL_ENABLE_INSTRUCTIONS=AVX2
test-portable: $(STAMP)
	$(PORTABLE_KERNELS) $(PYTEST) -m embedding

# What the two pytest passes of `make test` cost: wall time, the 30 slowest tests and files
# (benchmarks/bench_tests.py; figures only, build/bench_tests.json).
bench-tests: $(STAMP)
	$(BIN)/python benchmarks/bench_tests.py --pass main "$(PYTEST)" \
	  --pass portable "$(PORTABLE_KERNELS) $(PYTEST) -m embedding"

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

docs: $(STAMP)
	$(BIN)/mkdocs build --strict

# docs/img/report-screenshot.png, by the browser test's own functions (needs Debian's
# chromium and chromium-driver: apt-get install -y chromium chromium-driver).
screenshot: $(STAMP)
	$(BIN)/python tests/browser.py docs/img/report-screenshot.png

# The committed baseline, then the docs' plots drawn from it (a test fails when they are stale).
baseline: $(STAMP)
	$(BIN)/python scripts/retrieval_eval.py --write-baseline benchmarks/retrieval/baseline.json
	$(BIN)/python scripts/docs_plots.py --baseline benchmarks/retrieval/baseline.json --out docs/img --compare

bench: $(STAMP)
	$(BIN)/python benchmarks/bench_pipeline.py

bench-longmemeval: $(STAMP)  # about 5 minutes on 2 cores
	$(BIN)/python benchmarks/bench_longmemeval.py

bench-generators: $(STAMP)  # the synthetic-data generators: median seconds per call
	$(BIN)/python benchmarks/bench_generators.py

# The peer is never a dependency: python3 -m venv /tmp/mce-venv && /tmp/mce-venv/bin/pip install memory-core-eval
bench-peer: $(STAMP)  # the script reads MCEVAL=path/to/mceval (environment or make line)
	$(BIN)/python benchmarks/bench_peer.py

# a HotMem working copy (its sdist, git-initialised, weights edited) under `make eval STORE=`
# and `touch pyproject.toml && make eval`, in a scratch venv: about 40 s (--paths manual store)
bench-working-copy: $(STAMP)
	$(BIN)/python benchmarks/bench_working_copy.py

# the same results, byte for byte, as revision AGAINST (a refactor's check): about 20 s
AGAINST ?= HEAD
bench-same-results: $(STAMP)
	$(BIN)/python benchmarks/bench_same_results.py --against $(AGAINST)

# compare's peak RSS against the largest single run of its systems, at 2, 4 and 7 systems
bench-compare: $(STAMP)  # a generated LoCoMo file (10 conversations): about 5 minutes on 2 cores
	$(BIN)/python benchmarks/bench_compare.py

bench-embed: $(STAMP)  # prep at 1/2 workers and on Ray against a plain encode (--all: the older measurements)
	$(BIN)/python benchmarks/bench_embed.py

# generated LongMemEval S/M files x bm25-okapi/minilm x top-k 10/50: time and peak RSS per
# stage and of `run`, report.html's size and first paint, the official oracle's time beside
bench-scale: $(STAMP)  # 50 minutes on 2 cores under load 6-16 (minilm prep 26); M 500: --cells m:500
	$(BIN)/python benchmarks/bench_scale.py

bench-large: $(STAMP)  # 20,000 memories x 200 queries, a few minutes
	$(BIN)/python benchmarks/bench_large_fixture.py

bench-large-full: $(STAMP)  # 20,000 x 2,000: about 15 minutes with 1 worker, 9 with 2
	$(BIN)/python benchmarks/bench_large_fixture.py --queries 2000

# `make clean` empties BUILD (everything recallbench wrote; README.md stays) and removes .nox.
# It refuses a BUILD that is empty, or is / or a directory containing this one or $HOME
# (such as `.`, `..` or `~`): checked while make reads the recipe, so `make -n clean` stops
# too, and again by the shell after resolving symlinks.
BUILD_ABS = $(abspath $(BUILD))
build_contains = $(filter $(BUILD_ABS) $(BUILD_ABS)/%,$(1) $(1)/)
unsafe_build = $(strip \
  $(if $(strip $(BUILD)),,it is empty) \
  $(if $(filter ~%,$(BUILD)),make does not expand ~; give the path itself) \
  $(if $(filter 1,$(words $(BUILD))), \
    $(if $(filter-out /,$(BUILD_ABS)),,it is the filesystem root) \
    $(if $(call build_contains,$(CURDIR)),it is or contains $(CURDIR)) \
    $(if $(HOME),$(if $(call build_contains,$(HOME)),it is or contains your home directory))))

clean:
	$(if $(unsafe_build),$(error make clean: refusing BUILD='$(BUILD)': $(unsafe_build)))
	@if [ -e "$(BUILD)" ]; then \
	  dir=$$(CDPATH= cd -- "$(BUILD)" && pwd -P) || exit 1; \
	  [ "$$dir" != / ] || { echo "make clean: refusing BUILD='$(BUILD)': it is /" >&2; exit 1; }; \
	  for keep in "$$(pwd -P)" "$$(CDPATH= cd -- "$${HOME:-/}" 2>/dev/null && pwd -P)"; do \
	    case "$$keep/" in "$$dir"/*) \
	      echo "make clean: refusing BUILD='$(BUILD)': $$dir is or contains $$keep" >&2; exit 1;; \
	    esac; \
	  done; \
	  find "$$dir" -mindepth 1 -maxdepth 1 ! -name README.md -exec rm -rf -- {} +; \
	  echo "emptied $$dir (kept README.md)"; \
	fi
	rm -rf .nox
