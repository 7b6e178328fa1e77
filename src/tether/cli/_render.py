r"""Showing a run as it happens: the seed's trace, live in a terminal, or JSON lines.

Three renderers share one small interface (``start``, ``event``, ``stop``):

* :class:`PlainRenderer` prints each trace line as its event lands; for pipes
  and files. Streamed tokens are not printed (the text arrives whole with the
  reply).
* :class:`LiveRenderer` does the same on a terminal, with ``rich``: a spinner
  while the model thinks or a tool runs, and the model's words streaming below
  the trace until its reply is committed and printed as a trace line.
* :class:`JsonRenderer` prints every event, tokens included, as one JSON
  object per line (:func:`tether.events.to_dict`).

The trace lines are the story lines of :class:`tether.trace.Story` in the
trace's words (:func:`tether.trace.text_of`), with three changes for a
terminal: a final answer is printed whole (the trace shortens it to one line),
a resumed run says so, and in a chat the user's own words are not echoed back.

Model text and tool output are not trusted to reach a terminal as they are: a
file the agent reads may hold escape sequences that recolour the terminal, set
its title or clipboard, or clear the screen above an approval prompt.
:func:`visible` shows every control character the way ``cat -v`` does (and
bidirectional overrides as ``<U+202E>``) in everything the command line prints;
:func:`json_line` escapes them inside JSON strings.

>>> visible("hi\x1b]52;c;ZXZpbA==\x07 there\r")
'hi^[]52;c;ZXZpbA==^G there^M'
"""

from __future__ import annotations

import json
import re
import sys
from typing import IO, TYPE_CHECKING, Any, Protocol

from ..events import Event, ModelReplied, RunStarted, Token, ToolFinished, ToolStarted, to_dict
from ..trace import Line, Story, text_of

if TYPE_CHECKING:
    from rich.console import Console, RenderableType
    from rich.live import Live

WIDTH = 300  # a trace line shortens thoughts and results to this many characters
_BIDI = "\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069"  # marks and overrides that reorder text
# All controls but tab and newline, bidi overrides, and lone surrogates (a terminal cannot take them).
_CONTROLS = re.compile(f"[\x00-\x08\x0b-\x1f\x7f-\x9f{_BIDI}\ud800-\udfff]")
_RAW_IN_JSON = re.compile(f"[\x7f-\x9f{_BIDI}\ud800-\udfff]")  # what json.dumps leaves unescaped


def _shown(char: str) -> str:
    code = ord(char)
    if code < 0x20:
        return "^" + chr(code + 0x40)
    if code == 0x7F:
        return "^?"
    if code < 0xA0:
        return "M-^" + chr(code - 0x40)  # a C1 control, as cat -v shows its byte
    return f"<U+{code:04X}>"


def visible(text: str) -> str:
    """``text`` with control characters made visible (tabs and newlines kept)."""
    return _CONTROLS.sub(lambda m: _shown(m.group()), text)


def json_line(data: Any) -> str:
    """``data`` as one line of JSON with no raw control or bidi character in it (lossless)."""
    text = json.dumps(data, ensure_ascii=False)
    return _RAW_IN_JSON.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


class Renderer(Protocol):
    def start(self) -> None: ...
    def event(self, ev: Event) -> None: ...
    def stop(self) -> None: ...


def trace_lines(line: Line, *, chat: bool = False) -> list[str]:
    """The terminal lines for one story line: the trace's, but a run's own answer is printed whole
    when it finishes, a resume says so, and a chat does not echo the user's words."""
    top = not line.path
    if top and line.kind == "resumed":
        return ["  (resumed)"]
    if top and (line.kind == "answer" or (chat and line.kind == "asked")):
        return []  # the answer is shown whole when the run finishes; in a chat the user just typed it
    if top and line.kind == "finished":
        label = f"{line.agent}: " if chat else "  final answer: "
        return visible(label + line.text).split("\n")
    text = text_of(line, WIDTH)
    return visible(text).split("\n") if text is not None else []


_STYLES = {"finished": "bold", "thought": "cyan", "call": "cyan", "answer": "cyan", "asked": "", "resumed": "dim"}


def style_of(line: Line) -> str:
    """A rich style for a story line on a terminal (a child run's lines are all yellow)."""
    if line.path:
        return "yellow"
    if line.kind == "result":
        return "red" if line.error else "green"
    return _STYLES.get(line.kind, "yellow")


class PlainRenderer:
    """Trace lines on a text stream, one event at a time."""

    def __init__(self, out: IO[str] | None = None, *, name: str = "agent", chat: bool = False) -> None:
        self.out = out or sys.stdout
        self.name, self.chat = name, chat
        self.story = Story(name)

    def start(self) -> None:
        self.story = Story(self.name)  # each run is told afresh

    def event(self, ev: Event) -> None:
        for line in self.story.tell(ev):
            for text in trace_lines(line, chat=self.chat):
                self.out.write(text + "\n")
        self.out.flush()

    def stop(self) -> None:
        pass


class JsonRenderer:
    """Every event as one JSON line, tokens included."""

    def __init__(self, out: IO[str] | None = None) -> None:
        self.out = out or sys.stdout

    def start(self) -> None:
        pass

    def event(self, ev: Event) -> None:
        self.out.write(json_line(to_dict(ev)) + "\n")
        self.out.flush()

    def stop(self) -> None:
        pass


class LiveRenderer:
    """The trace on a terminal, with a spinner and the model's words as they stream."""

    def __init__(self, console: Console, *, name: str = "agent", chat: bool = False) -> None:
        self.console = console
        self.name, self.chat = name, chat
        self.story = Story(name)
        self.streamed = ""
        self.running: dict[str, str] = {}  # call id -> tool name
        self.doing: str | None = None
        self.live: Live | None = None

    def start(self) -> None:
        from rich.live import Live

        self.streamed, self.running, self.doing = "", {}, "thinking"
        self.story = Story(self.name)  # each run is told afresh
        self.live = Live(console=self.console, transient=True, refresh_per_second=10, get_renderable=self._status)
        self.live.start()

    def stop(self) -> None:
        if self.live is not None:
            self.doing = None
            self.live.stop()
            self.live = None

    def event(self, ev: Event) -> None:
        from rich.text import Text

        before = (self.doing, bool(self.streamed))
        self._follow(ev)
        if self.live is not None and (self.doing, bool(self.streamed)) != before:
            self.live.refresh()  # lines printed now carry the live view below them
        for line in self.story.tell(ev):
            for text in trace_lines(line, chat=self.chat):
                self.console.print(Text(text, style=style_of(line)), soft_wrap=True)

    def _follow(self, ev: Event) -> None:
        """Keep the status line in step with what the run is doing."""
        if isinstance(ev, Token):
            self.streamed += ev.text
            self.doing = "writing"
        elif isinstance(ev, ModelReplied):
            self.streamed = ""
            self.doing = None
        elif isinstance(ev, ToolStarted):
            self.running[ev.call.id] = ev.call.name
            self.doing = "running " + ", ".join(sorted(set(self.running.values())))
        elif isinstance(ev, ToolFinished):
            self.running.pop(ev.call_id, None)
            self.doing = "thinking" if not self.running else self.doing
        elif isinstance(ev, RunStarted):
            self.doing = "thinking"
        else:
            self.doing = None

    def _status(self) -> RenderableType:
        from rich.console import Group
        from rich.spinner import Spinner
        from rich.text import Text

        parts: list[Any] = []
        if self.streamed:
            tail = "\n".join(visible(self.streamed[-600:]).split("\n")[-6:])
            parts.append(Text("  " + tail, style="dim"))
        if self.doing:
            parts.append(Spinner("dots", text=Text(f"{self.story.agents[()]} is {self.doing}…", style="dim")))
        return Group(*parts)


def make_renderer(*, as_json: bool, chat: bool = False, name: str = "agent") -> Renderer:
    """JSON lines, a live terminal view, or plain trace lines, whichever fits stdout."""
    if as_json:
        return JsonRenderer()
    if sys.stdout.isatty():
        from rich.console import Console

        return LiveRenderer(Console(), name=name, chat=chat)
    return PlainRenderer(name=name, chat=chat)
