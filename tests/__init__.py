"""The checker and the project's tests.

For the learner: `check.py` (`python -m tests.check NN`) runs a step's
checks, declared in `specs/step_NN/` (its checks in `__init__.py`, their hints
as data in `hints.toml`) on the shared machinery in `checker/`, whose
`__init__.py` is the interface the learner's commands use, against the NumPy
references: `reference_gpt2.py` (GPT-2, Part I), `reference_llama.py` (Part II's
pieces and the Llama-style model), `reference_mla.py` (multi-head latent
attention and its absorbed decode) and `reference_backward.py` (attention's
backward pass and finite differences).

For maintainers: `test_*.py`, run by pytest; `fixtures.py` makes checkpoints
locally; `mistakes.py` applies the mistakes a spec must name
(`specs/step_NN/mistakes.py`) to its solution; `mutation_equivalents.toml`
lists the mutants `devtools.mutate` may leave alive, each with its reason.

The checker imports `common` and `solutions` only.
"""
