# kgroup: `make serve` runs the broker on 127.0.0.1:9092 with data in ./data;
# `make test` installs everything the whole suite needs and runs it; `make cluster` starts a
# 3-broker cluster over ZooKeeper in the background (./cluster; `kgroup cluster down` stops it).
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PYTEST_ARGS ?=
# Two pytest-xdist workers, one file (or one shared unit, tests/conftest.py) at a time per worker;
# `make test PYTEST_XDIST=-n0` runs the suite in one process.
PYTEST_XDIST ?= -n 2 --dist loadgroup

.PHONY: serve cluster test test-long bench install install-test

$(VENV)/bin/python:
	@echo "==> creating virtual environment in $(VENV)"
	$(PYTHON) -m venv $(VENV)

# Editable installs in compat mode put the checkout on sys.path (a .pth file), so PySpark's
# lookup of installed pyspark_* modules finds pyspark_kgroup; the default mode's import hook
# hides top-level modules from that lookup.
EDITABLE := --config-settings editable_mode=compat -e

$(VENV)/.installed: pyproject.toml | $(VENV)/bin/python
	@echo "==> installing kgroup (editable) into $(VENV)"
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet $(EDITABLE) .
	@touch $@

$(VENV)/.installed-test: pyproject.toml scripts/install-test-deps.sh scripts/install-interop-deps.sh \
		tests/interop/node/package-lock.json $(VENV)/.installed
	@echo "==> installing test dependencies (pytest, hypothesis, real Kafka clients, pyspark, kcat, Java, kafkajs, Burrow)"
	$(PY) -m pip install --quiet $(EDITABLE) '.[test,spark]'
	bash scripts/install-test-deps.sh
	@touch $@

install: $(VENV)/.installed
install-test: $(VENV)/.installed-test

serve: install
	@echo "==> starting the kgroup broker on 127.0.0.1:9092 (data in ./data; Ctrl-C stops it)"
	$(PY) -m kgroup serve --override listeners=PLAINTEXT://127.0.0.1:9092 --override log.dirs=./data

# kazoo (the cluster extra) and Debian's zookeeper (scripts/install-interop-deps.sh, as root)
cluster: install
	$(PY) -m pip install --quiet $(EDITABLE) '.[cluster]'
	@[ -f /usr/share/java/zookeeper.jar ] || bash scripts/install-interop-deps.sh
	@echo "==> starting ZooKeeper and 3 kgroup brokers on 127.0.0.1:9092-9094 (data and logs in ./cluster)"
	$(PY) -m kgroup cluster up --brokers 3 --dir ./cluster --port 9092
	@echo "==> stop them with: $(PY) -m kgroup cluster down --dir ./cluster"

# ruff (pyflakes, bugbear) and mypy (the pure core) first: a finding fails the run before pytest.
# pytest exits 5 when it collected nothing: that is a broken suite, never a pass.
test: install-test
	@echo "==> ruff check, mypy"
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy
	@echo "==> running the test suite"
	@$(PY) -m pytest $(PYTEST_XDIST) --durations=20 $(PYTEST_ARGS); rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "pytest collected no tests: failing the run"; exit 1; fi; exit $$rc

test-long: install-test
	@echo "==> running the test suite with the long soak/chaos runs"
	@$(PY) -m pytest --long $(PYTEST_XDIST) $(PYTEST_ARGS); rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "pytest collected no tests: failing the run"; exit 1; fi; exit $$rc

bench: install-test
	@echo "==> running the benchmarks (each prints kgroup next to its peer, same run)"
	$(PY) benchmarks/codec_bench.py
	$(PY) benchmarks/assignor_bench.py
	$(PY) benchmarks/server_assignor_bench.py
	$(PY) benchmarks/data_path_bench.py
	$(PY) benchmarks/coordinator_bench.py
	$(PY) benchmarks/coordinator_bench.py --metrics
	$(PY) benchmarks/consumer_group_bench.py
	$(PY) benchmarks/testing_bench.py
	$(PY) benchmarks/test_control_bench.py
	$(PY) benchmarks/transactions_bench.py
	$(PY) benchmarks/share_group_bench.py
	$(PY) benchmarks/share_consumer_bench.py
	$(PY) benchmarks/spark_read_bench.py
	$(PY) benchmarks/spark_write_bench.py
	$(PY) benchmarks/footprint_bench.py
	$(PY) benchmarks/cleaner_stall_bench.py $(if $(BASELINE_REV),--baseline-rev $(BASELINE_REV))
	$(PY) benchmarks/security_bench.py
	$(PY) benchmarks/cluster_failover_bench.py
