"""Lifecycle: the states of an execution, a step attempt and a wait (``states``), and every
transition between execution statuses with the SQL that performs it (``transitions``): the one
place a status or a transition is named. The statuses' lists (``STATUSES``, ``LIVE_STATUSES``,
``TERMINAL_STATUSES``) are derived from the enum (plain strings);
``base.statuses`` re-exports them with the SQL literal helpers.

Front ends (the console, bench) may use the names in ``__all__`` below, no module of it.

May import: nothing of kestrel_core outside this package.
"""

from kestrel_core.lifecycle import states
from kestrel_core.lifecycle.states import *  # noqa: F403  (its __all__: the package re-exports them all)
from kestrel_core.lifecycle.transitions import BY_NAME, TRANSITIONS, Actor, Transition, diagram, transition

__all__ = [*states.__all__, "BY_NAME", "TRANSITIONS", "Actor", "Transition", "diagram", "transition"]
