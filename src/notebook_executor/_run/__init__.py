"""One run composed: every input check gives a plan (plan.py), and a plan is run (runner.py)."""
