"""Chaos tests: workers killed, frozen past their lease, and the database restarted mid-run.

``python -m tests.chaos --minutes 10`` runs the long mode by hand; test_chaos.py runs a short
one in the suite. See harness.py (what happens) and checks.py (what must still hold).
"""
