"""Small experiments for the book's "Try it" sections: `python -m steps.try_it.NAME`.

Each one runs on the reference solutions in seconds and prints what it shows;
tests/test_try_it.py runs them all.
"""
