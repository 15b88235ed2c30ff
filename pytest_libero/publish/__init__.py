"""Results people can publish (docs/compare.md): two runs compared case by case with
exact tests, one run's table, a per-episode CSV and a model card's numbers.

Everything here reads finished run folders through ``results.run_reader`` and never
imports the simulator: ``stats`` (the arithmetic), ``pairing`` (which runs may be
compared and which cases pair), ``comparison`` (the rows and the verdict), ``tables``
(terminal, Markdown, LaTeX and JSON), ``episodes`` (the CSV rows), ``card`` (the
model-index block), ``command`` (the subcommands).
"""
