# isofabric developer commands. Every target creates the virtualenv on first use.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# Two installs: `make run` needs the service's dependencies (the `server` extra; the base
# distribution alone is the deploy agents' install); the test and lint targets add the
# development toolchain (the `dev` extra, and pip itself inside the venv). The venv is created
# without pip and the interpreter's own pip installs into it (`pip --python`): creating a venv
# with pip and upgrading that pip took 7.5 s of the 25 s `make run` may take on a fresh clone.
# --no-compile: modules are byte-compiled when first imported, not all of them at install.
RUN_STAMP := $(VENV)/.installed-run
STAMP := $(VENV)/.installed
PIP := $(PYTHON) -m pip --python $(BIN)/python install --quiet --disable-pip-version-check
HOST ?= 127.0.0.1
PORT ?= 8000

.PHONY: run test bench lint docs format clean

$(BIN)/python:
	$(PYTHON) -m venv --without-pip $(VENV)

$(RUN_STAMP): pyproject.toml | $(BIN)/python
	$(PIP) --no-compile -e '.[server]'
	touch $@

$(STAMP): pyproject.toml | $(BIN)/python
	$(PIP) -e '.[dev]' pip
	touch $@ $(RUN_STAMP)

## run: start the API on the embedded SQLite database (./isofabric.db) with demo data; the first
## run creates the signing key (./isofabric-signing.key, 0600), its keyring
## (./isofabric-keyring.jsonl) and the OpenSM secret (./isofabric-opensm.secret, 0600), as
## `isofabric keys create` does (`serve --demo` runs it in-process); later runs keep them
run: $(RUN_STAMP)
	$(BIN)/isofabric serve --demo --host $(HOST) --port $(PORT)

## test: the whole suite (policies, tenancy, api, conformance, docs examples)
## (on TEST_WORKERS processes, a test module per worker so that its fixtures and labs are built
## once; it prints the 20 slowest tests: docs/maintainers.md says what each proves; the budget
## is 10 minutes on 2 cores). Then two modules side by side, each printed when both are done:
## schemathesis reports each API operation as a subtest, which xdist's workers do not carry
## back, so it runs in a process of its own on one core; the documentation's examples
## (tests/docs/test_examples.py) run their pages' services and shells on the other.
TEST_WORKERS ?= 2
BESIDE_OUT := $(VENV)/docs-examples.out
test: $(STAMP)
	$(BIN)/pytest -n $(TEST_WORKERS) --dist loadfile --ignore=tests/api/test_schemathesis.py \
	  --ignore=tests/docs/test_examples.py --durations=20
	@$(BIN)/pytest -p no:cacheprovider tests/docs/test_examples.py >$(BESIDE_OUT) 2>&1 & \
	  docs=$$!; \
	  $(BIN)/pytest tests/api/test_schemathesis.py; api=$$?; \
	  wait $$docs; examples=$$?; cat $(BESIDE_OUT); \
	  test $$api -eq 0 && test $$examples -eq 0

## bench: scale benchmarks (InfiniBand: 100k ports, 2,000 tenants; RoCE: 64 leaves, 16k NICs,
## 500 tenants, and every leaf's CONFIG_DB patch for an onboarding and an offboarding there,
## and the sync status's rollout phase after an offboarding there (cold and cached);
## partitions.conf parser on 100k members; /healthz latency under uvicorn during a
## 100k-port import; /healthz and an operator's GET /v1/tenants p99 while an auditor keeps both
## its heavy slots busy with each heavy route (32 MiB config audits, observations, proofs) and
## an operator with 100k-port topology imports (<= 100 ms and <= 250 ms, MET / NOT MET); that import over HTTP, first and unchanged, against the parse (issue 12,
## item 5, MET / NOT MET); OpenSM and P_Key read-back on a 1,024-HCA ibsim fat tree; the deploy
## agent's cycles against a real service on that fabric; the last two skipped without the lab
## tools; issue 12's targets over HTTP, each printed MET / NOT MET: allocation (IB, RoCE), reads,
## change set, sustained mutations, on SQLite and on PostgreSQL at ISOFABRIC_BENCH_POSTGRES_URL
## (default postgres@127.0.0.1:5432; a database of its own, dropped after; skipped if it does
## not answer), about 10-15 minutes); the command line's start-up (`isofabric --help` <= 0.5 s,
## a REST command <= 0.8 s, MET / NOT MET, and the slowest imports) and `make run` on a fresh
## clone answering its first request (<= 20 s, MET / NOT MET); the UFM-compatible API over HTTP
## on the 100k-port fabric, on SQLite and PostgreSQL (issue 29): facade write p50/p99 (p99 <= 2 s,
## MET / NOT MET) and, for a burst of 1,000 single-GUID adds while a deploy agent runs with
## --interval 1 --min-interval 5, the manifests it fetched and applied (at most one applied per
## --min-interval, MET / NOT MET); prints figures, asserts no timings
bench: $(STAMP)
	$(BIN)/python -m tests.benchmarks.bench_scale
	$(BIN)/python -m tests.benchmarks.bench_roce
	$(BIN)/python -m tests.benchmarks.bench_roce_patch
	$(BIN)/python -m tests.benchmarks.bench_roce_sync
	$(BIN)/python -m tests.benchmarks.bench_parsers
	$(BIN)/python -m tests.benchmarks.bench_healthz
	$(BIN)/python -m tests.benchmarks.bench_heavy_work
	$(BIN)/python -m tests.benchmarks.bench_import
	$(BIN)/python -m tests.benchmarks.bench_readback
	$(BIN)/python -m tests.benchmarks.bench_agent
	$(BIN)/python -m tests.benchmarks.bench_changes
	$(BIN)/python -m tests.benchmarks.bench_console
	$(BIN)/python -m tests.benchmarks.bench_cli
	$(BIN)/python -m tests.benchmarks.bench_ufm

## lint: formatting, lint, types and import-layer contracts
lint: $(STAMP)
	$(BIN)/ruff format --check .
	$(BIN)/ruff check .
	$(BIN)/mypy
	$(BIN)/lint-imports

## docs: build the documentation site into site/ (MkDocs, Material theme; mkdocs.yml); open
## site/index.html, no server or internet needed; a broken link or a page missing from the
## navigation fails the build
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet
	@echo "the documentation: site/index.html"

format: $(STAMP)
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

clean:
	rm -rf $(VENV) site .pytest_cache .mypy_cache .ruff_cache .hypothesis
