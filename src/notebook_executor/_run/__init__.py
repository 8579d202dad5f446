"""One run composed: the caller's options (options.py) and arguments (checks.py) checked into
a plan (plan.py), and a plan run (runner.py)."""
