"""Skills for library users: folders read and checked, the index in the instructions, load_skill."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from tether import Action, Agent, Invocation, UserError, tool
from tether.skills import front_matter, read_skill, skill_set
from tether.testing import ScriptedModel


def _skill(root: Path, name: str, head: str | None = None, body: str = "Do the thing.") -> Path:
    folder = root / name
    folder.mkdir(parents=True)
    head = head if head is not None else f"---\nname: {name}\ndescription: Does {name}.\n---\n"
    (folder / "SKILL.md").write_text(head + body)
    return folder


@pytest.mark.parametrize(
    ("head", "why"),
    [
        ("name: x\n", "line 1: must be '---'"),
        ("---\nname: bad\ndescription: no end\n", "line 4: expected 'key: value', got 'Do the thing.'"),
        ("---\nname: bad\n---\n", "description must be text"),
        ("---\ndescription: d\n---\n", "name must be lowercase"),
        ("---\nname: Bad_Name\ndescription: d\n---\n", "name must be lowercase"),
        ("---\nname: other\ndescription: d\n---\n", "name 'other' must be the name of its folder, 'bad'"),
        ("---\nname: bad\nname: bad\ndescription: d\n---\n", "line 3: 'name' is given twice"),
        ("---\nname: bad\ndescription: >\n  folded text\n---\n", "line 3: the value of 'description' is YAML"),
        ("---\nname: bad\ndescription: Use when: asked\n---\n", "line 3: the value of 'description' holds ': '"),
        ('---\nname: bad\ndescription: "open\n---\n', "line 3: the value of 'description' opens a quote"),
        ("---\nname: bad\n  indented: x\ndescription: d\n---\n", "line 3: an indented line belongs under a key"),
        ("---\nname: bad\njust words\n---\n", "line 3: expected 'key: value'"),
        ("---\nname: bad\ndescription:\n  nested: map\n---\n", "description must be text"),
    ],
)
def test_a_bad_front_matter_is_an_error_that_names_the_file(tmp_path: Path, head: str, why: str) -> None:
    folder = _skill(tmp_path / "skills", "bad", head)
    with pytest.raises(UserError) as raised:
        Agent(ScriptedModel(["hi"]), skills=[tmp_path / "skills"])
    message = str(raised.value)
    assert message.startswith(f"{folder / 'SKILL.md'}: ") and why in message


def test_quoted_values_comments_and_metadata_are_read(tmp_path: Path) -> None:
    head = (
        "---\n# a comment\nname: ok\ndescription: \"Use when: the user asks \\\"why\\\"\"\nlicense: 'it''s MIT'\n"
        "metadata:\n  owner: team-a\n  version: '1.2'\n---\n"
    )
    skill = read_skill(_skill(tmp_path, "ok", head))
    assert skill.description == 'Use when: the user asks "why"'
    assert skill.fields["license"] == "it's MIT" and skill.fields["metadata"] == {"owner": "team-a", "version": "1.2"}
    assert front_matter("---\r\nname: crlf\r\n---\r\nbody")[0] == {"name": "crlf"}
    with pytest.raises(UserError, match=r"^x/SKILL\.md: the front matter has no closing '---' line"):
        front_matter("---\nname: x\n", "x/SKILL.md")


def test_two_skills_with_one_name_and_a_missing_folder_are_refused(tmp_path: Path) -> None:
    _skill(tmp_path / "a", "same")
    _skill(tmp_path / "b", "same")
    with pytest.raises(UserError, match="two skills are named 'same'"):
        skill_set([tmp_path / "a", tmp_path / "b"])
    with pytest.raises(UserError, match="is not a directory"):
        skill_set([tmp_path / "nowhere"])
    with pytest.raises(UserError, match="a list of folders"):
        skill_set(str(tmp_path / "a"))  # type: ignore[arg-type]


def test_load_skill_gives_the_body_the_files_and_one_file_never_one_outside(tmp_path: Path) -> None:
    folder = _skill(tmp_path, "forms", body="Fill forms with scripts/fill.py.\n")
    (folder / "scripts").mkdir()
    (folder / "scripts" / "fill.py").write_text("print('filled')\n")
    (folder / ".hidden").write_text("x")
    (tmp_path / "secret.txt").write_text("not the skill's")
    calls = [
        Action("load_skill", {"name": "forms"}),
        Action("load_skill", {"name": "forms", "file": "scripts/fill.py"}),
        Action("load_skill", {"name": "forms", "file": "../secret.txt"}),
        Action("load_skill", {"name": "nope"}),
        "done",
    ]
    result = Agent(ScriptedModel(calls), skills=[folder]).run_sync("fill it")
    loaded, script, outside, unknown = [m for m in result.context if m.role == "tool"]
    assert "Fill forms with scripts/fill.py." in loaded.text and "- scripts/fill.py" in loaded.text
    assert ".hidden" not in loaded.text and "SKILL.md" not in loaded.text.split("Files of this skill")[1]
    assert script.text == "print('filled')\n"
    assert outside.is_error and "not a file of skill 'forms'" in outside.text and "not the skill's" not in outside.text
    assert unknown.is_error and "the skills are: forms" in unknown.text


def test_dynamic_instructions_get_the_index_too(tmp_path: Path) -> None:
    _skill(tmp_path / "skills", "greet")

    def rules(call: Invocation[str]) -> str:
        return f"You serve {call.deps}."

    model = ScriptedModel(["hi"])
    Agent(model, instructions=rules, skills=[tmp_path / "skills"]).run_sync("hello", deps="Ana")
    system = model.requests[0][0].text
    assert system.startswith("You serve Ana.\n\nSkills:") and system.endswith("- greet: Does greet.")


def test_without_skills_nothing_changes() -> None:
    agent = Agent(ScriptedModel(["hi"]), instructions="be brief")
    assert agent.instructions == "be brief" and "load_skill" not in agent.tools


def test_a_skill_folder_swapped_for_a_symlink_during_the_run_is_not_read(tmp_path: Path) -> None:
    folder = _skill(tmp_path / "skills", "notes")
    (folder / "own.txt").write_text("the skill's own file")
    outside = tmp_path / "host"
    outside.mkdir()
    (outside / "secret.txt").write_text("TOP-SECRET host file")

    @tool(effect="none")
    def swap() -> str:
        """What a sandboxed shell can do in a writable skills folder: rm -rf notes && ln -s <host dir> notes."""
        shutil.rmtree(folder)
        folder.symlink_to(outside)
        return "swapped"

    calls = [
        Action("load_skill", {"name": "notes", "file": "own.txt"}),
        Action("swap", {}),
        Action("load_skill", {"name": "notes", "file": "secret.txt"}),
        Action("load_skill", {"name": "notes"}),
        "done",
    ]
    result = Agent(ScriptedModel(calls), [swap], skills=[tmp_path / "skills"]).run_sync("go")
    own, _, secret, listing = [m for m in result.context if m.role == "tool"]
    assert own.text == "the skill's own file"
    assert secret.is_error and "was replaced since the agent was built" in secret.text
    assert "TOP-SECRET" not in secret.text
    assert listing.is_error and "secret.txt" not in listing.text


def test_a_file_that_becomes_a_symlink_is_refused_and_hidden_files_are_not_read(tmp_path: Path) -> None:
    folder = _skill(tmp_path, "notes")
    (tmp_path / "secret.txt").write_text("TOP-SECRET")
    (folder / ".env").write_text("API_KEY=sk-live-123")
    (folder / ".git").mkdir()
    (folder / ".git" / "config").write_text("url = https://user:token@example.com")
    skill = read_skill(folder)
    for hidden in (".env", ".git/config", "./.env", "sub/../.env"):
        with pytest.raises(ValueError, match="is a hidden file"):
            skill.read(hidden)
    (folder / "link.txt").symlink_to(tmp_path / "secret.txt")  # resolves outside: refused as before
    with pytest.raises(ValueError, match="not a file of skill"):
        skill.read("link.txt")
    os.mkfifo(folder / "pipe")  # a FIFO is not read (reading it would block the run)
    with pytest.raises(ValueError, match="not a regular file"):
        skill.read("pipe")


def test_a_fifo_named_skill_md_is_refused_without_blocking(tmp_path: Path) -> None:
    (tmp_path / "evil").mkdir()
    os.mkfifo(tmp_path / "evil" / "SKILL.md")  # nobody writes to it: opening it blocking would hang
    with pytest.raises(UserError, match=r"SKILL\.md: is not a regular file"):
        skill_set([tmp_path])


def test_a_visible_name_that_links_to_a_hidden_file_is_not_read(tmp_path: Path) -> None:
    folder = _skill(tmp_path, "notes")
    (folder / ".env").write_text("API_KEY=sk-live-123")
    (folder / "notes.txt").symlink_to(folder / ".env")
    with pytest.raises(ValueError, match="is a hidden file"):
        read_skill(folder).read("notes.txt")


def test_a_file_opened_outside_the_folder_is_known_by_where_it_is(tmp_path: Path) -> None:
    from tether.skills import _opened_inside  # the check after open, against a folder swapped mid-read

    folder = _skill(tmp_path, "notes")
    (tmp_path / "secret.txt").write_text("x")
    for path, inside in ((folder / "SKILL.md", True), (tmp_path / "secret.txt", False)):
        fd = os.open(path, os.O_RDONLY)
        try:
            assert _opened_inside(fd, str(folder)) is inside
        finally:
            os.close(fd)
