# Two commands on a fresh machine:  `make demo`  (train the tiny model, show it learning)  and  `make test`.
.PHONY: setup demo test lint bench

setup:
	@bash scripts/setup.sh

demo: setup
	.venv/bin/reasonrl demo

test:
	@REASONRL_BROWSER=1 bash scripts/setup.sh
	.venv/bin/python -m pytest -q -p no:cacheprovider

lint: setup
	.venv/bin/ruff check reasonrl tests bench && .venv/bin/ruff format --check reasonrl tests bench
