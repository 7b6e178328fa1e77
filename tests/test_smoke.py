from support import add
from tether import Action, Agent
from tether.testing import ScriptedModel


def test_a_tool_round_trip_gives_the_final_answer() -> None:
    model = ScriptedModel([Action("add", {"a": 2, "b": 3}), "5"])
    result = Agent(model, [add]).run_sync("2 + 3?")
    assert result.status == "finished"
    assert result.output == "5"
    assert [m.role for m in result.context] == ["user", "assistant", "tool", "assistant"]
    model.assert_consumed()
