"""Configuration for the command line: which model, workspace, store and key.

Each setting comes from the first place that has it: a command-line flag, an
environment variable, the workspace's ``.tether/config.toml`` (out of the
agent's reach: the file and shell tools cannot touch ``.tether``), the user's
``~/.config/tether/config.toml``, then a default. :mod:`tether.cli._trust`
refuses the places an agent could have written. Everything that can be wrong
with it (an unknown model prefix, a missing API key, an extra that is not
installed) raises :class:`ConfigError` with one line that says what to set or
install; the command line prints it and exits with status 2.

A resumed run continues with the brain and workspace it recorded when it
started (:func:`settings_for_run`), not with whatever this command would pick.

>>> settings = load_settings(workspace=".", model="scripted:demo.json")  # doctest: +SKIP
>>> agent = build_agent(settings, store, key)  # doctest: +SKIP
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..exceptions import StoreError, UserError, install_hint
from ..providers.presets import PRESETS
from ._errors import ConfigError
from ._trust import STATE_DIR, check_store, check_workspace, inside, user_config_dir

if TYPE_CHECKING:
    from ..agent import Agent
    from ..policy import Policy
    from ..stores import RunStore
    from ..tools import Tool

CONFIG_KEYS = frozenset(
    ("model", "base_url", "api_key_env", "store", "instructions", "max_steps", "context_size", "mcp", "offload_over")
)
INT_KEYS = frozenset(("max_steps", "context_size", "offload_over"))
OFFLOAD_OVER = 20_000  # characters: a longer tool result goes to a workspace file (tether.toolkits.offload)
RECORDED = {"model": "--model", "base_url": "--base-url", "api_key_env": "--api-key-env", "workspace": "--workspace"}
PROVIDERS = ("openai", "anthropic", "local", "scripted")
DEFAULT_KEY_ENV = {"openai": "OPENAI_API_KEY", "anthropic": "ANTHROPIC_API_KEY"}
OPENAI_URL = "https://api.openai.com/v1"
OFFICIAL_URLS = frozenset((OPENAI_URL, "https://api.anthropic.com"))
INSTRUCTIONS = (
    "You are a careful assistant working in the directory {workspace}; paths are relative to it. "
    "To answer a question, look with read_file, list_dir or find_files and then answer: do not "
    "change anything. Write files or run commands only when the user asks for a change. If a "
    "human denies a call, do not try it another way: tell the user what you did not do."
)


@dataclass(frozen=True, slots=True)
class ModelSpec:
    """Which brain: ``provider`` (openai, anthropic, local, scripted) and its ``name``."""

    provider: str
    name: str
    text: str  # as the user wrote it, for messages


@dataclass(frozen=True, slots=True)
class Settings:
    """Everything a command needs to build an agent and reach its runs."""

    workspace: Path
    store_url: str
    model: str | None = None
    base_url: str | None = None
    api_key_env: str | None = None
    instructions: str | None = None
    max_steps: int = 20
    context_size: int | None = None  # the offline model's context window, in tokens
    offload_over: int = OFFLOAD_OVER  # 0: never offload
    unsafe_no_sandbox: bool = False
    env: Mapping[str, str] = field(default_factory=lambda: dict(os.environ), repr=False)
    given: frozenset[str] = frozenset()  # the RECORDED settings given as flags


def load_settings(
    *,
    workspace: str | None = None,
    store: str | None = None,
    model: str | None = None,
    base_url: str | None = None,
    api_key_env: str | None = None,
    max_steps: int | None = None,
    context_size: int | None = None,
    unsafe_no_sandbox: bool = False,
    env: Mapping[str, str] | None = None,
    reading: bool = False,
) -> Settings:
    """Merge flags, environment and config files (first one that sets a key wins).

    ``reading``: the command runs no agent (``runs``, ``show``, the decisions); a store that lies in
    the workspace is then refused only when an agent of the command line works there (it has a
    ``.tether/``), so a store a program of yours made in its own directory can be read and decided.
    """
    env = dict(os.environ) if env is None else dict(env)
    ws = workspace_dir(workspace or os.getcwd())
    files = [read_config(ws / STATE_DIR / "config.toml"), read_config(user_config_path(env))]
    flags = {"model": model, "base_url": base_url, "api_key_env": api_key_env, "store": store}
    from_env = {
        "model": env.get("TETHER_MODEL"),
        "base_url": env.get("TETHER_BASE_URL"),
        "store": env.get("TETHER_STORE"),
    }

    def pick(key: str) -> Any:
        for source in (flags, from_env, *files):
            if source.get(key) not in (None, ""):
                return source[key]
        return None

    steps = max_steps if max_steps is not None else pick("max_steps")
    window = context_size if context_size is not None else pick("context_size")
    offload = pick("offload_over")
    store_url = pick("store") or default_store_url(ws)
    if not reading or (ws / STATE_DIR).is_dir():
        check_store(ws, store_url)
    flags["workspace"] = workspace
    return Settings(
        workspace=ws,
        store_url=store_url,
        model=pick("model"),
        base_url=pick("base_url"),
        api_key_env=pick("api_key_env"),
        instructions=pick("instructions"),
        max_steps=int(steps) if steps is not None else 20,
        context_size=int(window) if window is not None else None,
        offload_over=int(offload) if offload is not None else OFFLOAD_OVER,
        unsafe_no_sandbox=unsafe_no_sandbox,
        env=env,
        given=frozenset(name for name in RECORDED if flags.get(name)),
    )


def workspace_dir(path: str) -> Path:
    """The workspace, resolved and checked (see :func:`tether.cli._trust.check_workspace`)."""
    ws = Path(path).expanduser().resolve()
    if not ws.is_dir():
        raise ConfigError(f"workspace {str(ws)!r} is not a directory (check --workspace)")
    check_workspace(ws)
    return ws


def user_config_path(env: Mapping[str, str]) -> Path:
    return user_config_dir(env) / "config.toml"


def read_config(path: Path) -> dict[str, Any]:
    """The settings in one TOML file ({} when it does not exist)."""
    try:
        with path.open("rb") as f:
            data = tomllib.load(f)
    except FileNotFoundError:
        return {}
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"cannot read config file {str(path)!r}: {exc}") from None
    unknown = sorted(set(data) - CONFIG_KEYS)
    if unknown:
        raise ConfigError(f"unknown setting {unknown[0]!r} in {str(path)!r}; known: {', '.join(sorted(CONFIG_KEYS))}")
    for key, value in data.items():
        if key == "mcp":  # [mcp.servers.NAME] tables, checked by tether.cli._mcp
            continue
        kind = int if key in INT_KEYS else str
        if not isinstance(value, kind) or isinstance(value, bool):
            names = {"int": "an integer", "str": "a string", "bool": "true or false"}
            raise ConfigError(
                f"setting {key!r} in {str(path)!r} must be {names.get(kind.__name__, kind.__name__)}, got {value!r}"
            )
    return data


def default_store_url(workspace: Path) -> str:
    """``sqlite:////abs/workspace/.tether/runs.db`` (four slashes: an absolute path)."""
    return f"sqlite:///{workspace / STATE_DIR / 'runs.db'}"


def location(settings: Settings) -> str:
    """The flags another command needs to find this run's store (and, by default, its key)."""
    parts = []
    if settings.workspace != Path.cwd().resolve():
        parts.append(f" --workspace {settings.workspace}")
    if settings.store_url != default_store_url(settings.workspace):
        parts.append(f" --store {settings.store_url}")
    return "".join(parts)


# -- what a run records ------------------------------------------------------------


def recorded_fields(settings: Settings) -> dict[str, str]:
    """The brain (never a key) and workspace a new run records in its first event."""
    fields = {name: _asked(settings, name) for name in RECORDED}
    return {"provider": parse_model(settings.model, settings.base_url).provider, **fields}


def _asked(settings: Settings, name: str) -> str:
    """A RECORDED setting as this command gives it, in the form runs record it."""
    if name == "model":
        return _normal(settings.model or "", settings.base_url)
    if name == "base_url":
        return (settings.base_url or "").rstrip("/")
    if name == "workspace":
        return str(settings.workspace)
    return settings.api_key_env or ""


def _normal(model: str, base_url: str | None) -> str:
    spec = parse_model(model, base_url)
    if spec.provider == "scripted":  # a script path read relative to the directory it was named in
        return f"scripted:{Path(spec.name).expanduser().resolve()}"
    return spec.text


def settings_for_run(settings: Settings, meta: Mapping[str, str], run_id: str) -> Settings:
    """The settings a run continues with: its recorded brain and workspace.

    A flag that asks for another value than the record is refused, naming both;
    environment variables and config files only choose for new runs.
    """
    if "workspace" not in meta or "model" not in meta:
        return settings  # started by another program: nothing recorded
    for name in sorted(settings.given):
        asked = _asked(settings, name)
        if asked != meta.get(name, ""):
            flag, was = RECORDED[name], meta.get(name) or "(none)"
            raise ConfigError(
                f"run {run_id!r} was started with {flag} {was}, not {asked}: resume it without "
                f"{flag} to continue as it started"
            )
    if not Path(meta["workspace"]).is_dir():
        raise ConfigError(f"run {run_id!r} was started in {meta['workspace']!r}, which is no longer a directory")
    ws = workspace_dir(meta["workspace"])
    check_store(ws, settings.store_url)
    return replace(
        settings,
        model=meta["model"],
        base_url=meta.get("base_url") or None,
        api_key_env=meta.get("api_key_env") or None,
        workspace=ws,
    )


# -- the model -----------------------------------------------------------------


def parse_model(text: str | None, base_url: str | None = None) -> ModelSpec:
    """``openai:NAME``, ``anthropic:NAME``, a preset (``groq:NAME``...), ``local[:NAME]``, ``scripted:FILE`` or NAME.

    A bare name is an OpenAI-compatible model. A name with a colon that is not
    one of those prefixes is accepted as a model name only with a base URL
    (Ollama names look like ``llama3.1:8b``).
    """
    if not text:
        return ModelSpec("local", "", "local")
    prefix, colon, rest = text.partition(":")
    if text == "local" or (colon and (prefix in PROVIDERS or prefix in PRESETS)):
        if prefix != "local" and not rest:
            raise ConfigError(f"model {text!r} names no model after {prefix + ':'!r}")
        return ModelSpec(prefix, rest, text)
    if colon and not base_url:
        raise ConfigError(
            f"unknown model prefix {prefix!r} in {text!r}; use openai:NAME, anthropic:NAME, "
            "local or scripted:FILE (or give --base-url for an OpenAI-compatible server)"
        )
    return ModelSpec("openai", text, text)


def make_policy(settings: Settings) -> Policy:
    """The brain the settings name, or ConfigError saying what is missing."""
    spec = parse_model(settings.model, settings.base_url)
    if settings.context_size is not None and spec.provider != "local":
        raise ConfigError(f"--context-size (context_size) sets the offline local model's window; {spec.text} is not it")
    if spec.provider == "scripted":
        from ._scripted import load_script

        return load_script(spec.name)
    if spec.provider == "local":
        return _local_model(spec, settings.context_size)
    preset = PRESETS.get(spec.provider) if spec.provider != "openai" else None  # groq:, ollama:...
    default = "https://api.anthropic.com" if spec.provider == "anthropic" else OPENAI_URL
    base_url = settings.base_url or (preset.base_url if preset else default)
    key = _api_key(spec, settings, base_url)
    kwargs: dict[str, Any] = {"base_url": base_url, "api_key": key}
    if spec.provider == "anthropic":
        provider = _import_provider("tether.providers.anthropic", "Anthropic")
    else:
        provider = _import_provider("tether.providers.openai_compat", "OpenAICompatible")
        kwargs.update({"preset": preset} if preset else {})
    return _construct(provider, spec, kwargs)


def _api_key(spec: ModelSpec, settings: Settings, base_url: str | None) -> str | None:
    """The key from the environment; required by the vendors' own endpoints or when named.

    A server of your own (Ollama, vLLM, llama.cpp) usually wants none.
    """
    name = settings.api_key_env or DEFAULT_KEY_ENV.get(spec.provider) or PRESETS[spec.provider].key_env
    key = settings.env.get(name)
    if key:
        return key
    if base_url and settings.api_key_env is None and base_url.rstrip("/") not in OFFICIAL_URLS:
        return None
    raise ConfigError(f"model {spec.text!r} needs an API key: set {name} (or name another variable with --api-key-env)")


def _import_provider(module: str, name: str) -> Any:
    import importlib

    try:
        return getattr(importlib.import_module(module), name)
    except ImportError as exc:
        raise ConfigError(f"{module}.{name} cannot be imported ({exc}); reinstall tether") from None


def _construct(provider: Any, spec: ModelSpec, kwargs: dict[str, Any]) -> Policy:
    try:
        return provider(spec.name, **kwargs)  # type: ignore[no-any-return]
    except UserError as exc:
        raise ConfigError(str(exc)) from None


def _local_model(spec: ModelSpec, context_size: int | None) -> Policy:
    """The offline model, checked now (runtime and weights) rather than at the first turn."""
    import importlib

    try:
        importlib.import_module("xllamacpp")
        from ..providers.local import LocalModel
    except ImportError as exc:
        raise ConfigError(_missing_extra("local", exc)) from None
    kwargs: dict[str, Any] = {"threads": 1}
    if context_size is not None:  # a long task overflows the default 8192 tokens
        kwargs["context_size"] = context_size
    if spec.name:
        kwargs["model"] = spec.name
    try:
        model = LocalModel(**kwargs)
        model.path()  # assembles and verifies the weights once; fails if they are missing
        model.load()  # now, not in the first turn: loading holds the GIL, so a Ctrl-C there would wait for it
    except UserError as exc:
        raise ConfigError(str(exc)) from None
    return model


def _missing_extra(extra: str, exc: ImportError) -> str:
    missing = f" ({exc.name!r} is missing)" if exc.name else ""
    return f"the offline local model needs tether[{extra}]{missing}: {install_hint(extra)}"


# -- store, key and agent ----------------------------------------------------------


async def open_store(settings: Settings) -> RunStore:
    """The run store at ``settings.store_url``, reached once so a dead server is a config error."""
    from ..stores import open_store as open_url

    try:
        store = open_url(settings.store_url)
    except UserError as exc:
        raise ConfigError(str(exc)) from None
    except StoreError as exc:
        raise ConfigError(f"cannot open the store {settings.store_url}: {_one_line(exc)}") from None
    try:
        await store.list_runs(limit=1)
    except StoreError as exc:
        await store.aclose()
        raise ConfigError(f"cannot open the store {settings.store_url}: {_one_line(exc)}") from None
    return store


def _one_line(exc: Exception) -> str:
    return " ".join(str(exc).split())


def build_tools(settings: Settings, read_only: Sequence[Path] = ()) -> list[Any]:
    """The workspace toolkit (files, shell, python), sandboxed unless told otherwise; its commands
    may also read the ``read_only`` folders (the skills')."""
    import warnings

    from ..exceptions import SandboxUnavailable
    from ..toolkits import UnsandboxedWarning, workspace_tools

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnsandboxedWarning)  # the CLI prints its own warning
        try:
            return workspace_tools(
                str(settings.workspace),
                unsafe_no_sandbox=settings.unsafe_no_sandbox,
                read_only_paths=[str(p) for p in read_only],
            )
        except SandboxUnavailable as exc:
            text = str(exc).replace("unsafe_no_sandbox=True", "--unsafe-no-sandbox")
            hint = "" if "--unsafe-no-sandbox" in text else " (or pass --unsafe-no-sandbox)"
            raise ConfigError(text + hint) from None


def build_agent(
    settings: Settings,
    store: RunStore,
    key: bytes,
    extra_tools: Sequence[Tool] = (),
    project: str = "",
    skills: Sequence[Path] = (),
) -> Agent:
    """The agent every command that runs the loop uses: same tools, same fingerprint.

    ``project`` is the project's instructions (its ``AGENTS.md`` files), after the agent's own;
    ``skills`` are skill folders, which the sandboxed commands may read.
    ``extra_tools`` come after the workspace toolkit (the command line's MCP servers' tools);
    ``ask_human`` comes last, so the agent can ask the person at the terminal (``tether answer``).
    """
    from ..agent import Agent
    from ..toolkits.offload import offload_results
    from ..tools import ask_human

    policy = make_policy(settings)
    instructions = settings.instructions or INSTRUCTIONS.format(workspace=settings.workspace)
    instructions += f"\n\n{project}" if project else ""
    tools = [*build_tools(settings, [p for p in skills if not inside(p, settings.workspace)]), *extra_tools]
    if settings.offload_over > 0:  # a long result goes to a file the model reads in windows
        tools = offload_results(
            tools, settings.workspace, over=settings.offload_over, preview=settings.offload_over // 10
        )
    return Agent(
        policy,
        [*tools, ask_human()],
        instructions=instructions,
        skills=skills,
        max_steps=settings.max_steps,
        store=store,
        signing_key=key,
    )
