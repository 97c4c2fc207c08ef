# Two commands on a fresh machine:  `make demo`  (train the tiny model, show it learning)  and  `make test`.
.PHONY: setup demo test lint bench

setup:
	@bash scripts/setup.sh

demo: setup
	.venv/bin/reasonrl demo

test:
	@REASONRL_BROWSER=1 bash scripts/setup.sh
	OMP_NUM_THREADS=1 .venv/bin/python -m pytest -q -p no:cacheprovider -n auto --dist loadfile --no-loadscope-reorder

lint: setup
	.venv/bin/ruff check reasonrl tests bench && .venv/bin/ruff format --check reasonrl tests bench
