"""The loop's machinery: private, read it in this order.

``run.py`` is the file to read first: :class:`~tether._loop.run.Run` holds the
loop (decide, act, write it down, repeat) and its one commit rule. Everything
else here is what the loop needs but is not the loop, each module knowing one
thing:

* ``turn.py``: pure; what to do with each open call (run it, write a note, wait);
* ``calls.py``: one tool call within its deadline, its failure as a note;
* ``children.py``: where a child run starts from, how its ending settles the call;
* ``budgets.py``: the limits, and a child's share of its parent's;
* ``resuming.py``: the checks before a paused run goes on;
* ``session.py``: a session's next run starts from the notebook its last run left;
* ``handoffs.py``: transfer tools, and the walk over a team of agents;
* ``settings.py``: what the loop reads from an agent (a Protocol), and the observer hook;
* ``result.py``: :class:`~tether.RunResult`, what a drained run returns;
* ``streams.py``: several async streams as one; ``crash.py``: the crash points of the durability tests.

Nothing outside ``tether`` should import from here: the public names are
exported by :mod:`tether` and by the flat modules beside this package.
"""
