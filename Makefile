# Thin aliases for the README's commands. Each target runs on its own.
PYTHON ?= .venv/bin/python

.PHONY: setup build embed check numbers test course lab benchmark

setup:
	python3 -m venv .venv && .venv/bin/pip install -r requirements-dev.txt

build:  ## Regenerate labs/ and solutions/ from notebooks/ (executes the solutions), then README's numbers.
	$(PYTHON) -m tools.build_notebooks && $(PYTHON) -m tools.readme_numbers

embed:  ## After a utils/ change: re-embed the course in labs/ and solutions/ (set-up cells only, outputs kept).
	$(PYTHON) -m tools.build_notebooks --embed-only

check:  ## Fail if labs/ or solutions/ differ from what notebooks/ gives, or README from solutions/.
	$(PYTHON) -m tools.build_notebooks --check && $(PYTHON) -m tools.readme_numbers --check

numbers:  ## Copy the committed solutions' summary outputs into README.md's numbers blocks.
	$(PYTHON) -m tools.readme_numbers

test:
	python3 -m venv .venv && .venv/bin/pip install -r requirements-dev.txt && .venv/bin/python -m pytest -n 2

course:
	python3 -m venv .venv && .venv/bin/pip install -r requirements.txt && .venv/bin/python -m tools.run_course

lab:  ## Copy the labs you lack into work/ and open JupyterLab there; JupyterLab's arguments in ARGS="...".
	$(PYTHON) -m tools.open_labs $(ARGS)

benchmark:  ## Compare the course pipeline with the alternatives and the decode ceiling.
	$(PYTHON) -m tools.benchmark
