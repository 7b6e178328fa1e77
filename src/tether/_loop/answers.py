"""Where the loop asks the agent's output validators (:mod:`tether.grounding`) about an answer.

* A typed answer is a call of the output tool: :func:`screened` turns a planned
  run of it into an error note when a validator refuses the value, so the
  output tool's tries are counted as for any invalid value.
* A text answer ends the run: :func:`text_ending` gives ``Finished``, or a note
  the model reads (and ``Failed`` once ``output_retries`` such notes are spent).
"""

from __future__ import annotations

from collections.abc import Sequence

from ..events import Event, Failed, Finished, Noted
from ..grounding import Ran, refusal
from ..journal import Journal, ran_calls
from ..messages import Message
from ..tools import Tool
from .settings import Settings
from .turn import Execute, Step, note

__all__ = ["CHECKED", "screened", "text_ending"]

CHECKED = "answer-check"  # the name of a note that refuses a text answer


def ran_of(journal: Journal, tools: dict[str, Tool]) -> Ran:
    """The run's calls so far, in the order they were made, as validators see them."""
    return Ran(ran_calls(journal), tools)


def screened(agent: Settings, journal: Journal, steps: list[Step]) -> list[Step]:
    """``steps``, with a run of the output tool replaced by a note when a validator refuses its value."""
    spec = agent.output
    if spec is None or not agent.output_validators:
        return steps
    out: list[Step] = []
    for step in steps:
        if isinstance(step, Execute) and step.tool.name == spec.name:
            why = refusal(agent.output_validators, step.args["value"], ran_of(journal, agent.tools))
            if why is not None:
                out.append(note(step.call, f"the answer was refused: {why}", "invalid-arguments"))
                continue
        out.append(step)
    return out


def text_ending(agent: Settings, journal: Journal, text: str) -> Sequence[Event]:
    """How a text reply ends the turn: the run finishes, or the answer goes back to the model."""
    why = refusal(agent.output_validators, text, ran_of(journal, agent.tools)) if agent.output_validators else None
    if why is None:
        return [Finished(text, journal.usage)]
    noted = Noted(Message("user", f"Your answer was not given to the user: {why}", name=CHECKED, is_error=True))
    tries = 1 + sum(1 for m in journal.context if m.name == CHECKED and m.is_error)
    if tries <= agent.output_retries:
        return [noted]
    failed = f"the answer was refused {tries} times (output_retries={agent.output_retries}); the last refusal: {why}"
    return [noted, Failed(failed, "OutputInvalid")]
