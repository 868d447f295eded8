"""The tools as a host embeds them: definitions, configuration, one call entry point.

:class:`SessionTools` binds the five tools to a query service (a
:class:`readmodel.query.SessionQuery` or a compatible object) and runs them:

>>> tools = SessionTools(SessionQuery.open("index.db"))
>>> caller = ToolCaller(session_id="s1", cwd="/work/project", events=events)
>>> result = tools.call("session_search", {"query": "migration"}, caller)
>>> result.text, result.is_error, result.code

A call never raises for anything the tool or the service does: failures come
back as an error :class:`ToolResult` whose text is ``Error: <message>`` and
whose ``code`` is the error code.  The module function :func:`call_tool` is
the same for a one-off call.

Execution rules, as in the reference host:

* arguments are checked against the tool's input schema first
  (``INVALID_ARGS``);
* the search tools run *exclusive* with a deadline of ``searchTimeoutMs``:
  past it the execution signal aborts with a ``TOOL_TIMEOUT`` reason, the
  running SQLite statement is interrupted, and the call reports the timeout
  (only after the service call has returned);
* the exact tools run *parallel*, without a deadline, and see the caller's
  own signal unchanged;
* an abort reason surfaces with its own message, and its code when it has a
  string one (``SESSION_QUERY_ABORTED`` otherwise).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from readmodel.core.cancel import AbortSignal, is_aborted
from readmodel.core.jsvalues import MAX_SAFE_INTEGER
from readmodel.projection.secrets import Policy, policy_from_env, redacts_index
from readmodel.projection.secrets import redact as redact_secrets
from readmodel.tools import inputs, operations
from readmodel.tools.access import Caller
from readmodel.tools.boundary import LOG_PREFIX, ServiceBoundary, WarningLogger, describe_failure
from readmodel.tools.errors import ABORTED, TOOL_NOT_FOUND, ToolError, ToolTimeout, tool_failed
from readmodel.tools.runtime import DeadlineSignal, ExecutionGate

TOOL_NAMES: Final = (
    "session_search",
    "session_event_search",
    "session_trace",
    "session_event_trace",
    "session_event_read",
)
PROMPT_SECTION_NAME: Final = "tool:session-query"
PROMPT_SECTION_ORDER: Final = 113
PROMPT_SECTION_TEXT: Final = (
    "Earlier work is searchable. To find an earlier session of this workspace, use session_search; "
    "to find an earlier event inside one session (this one by default), use session_event_search. "
    "Both return every match in one answer, with no paging, and only ever cover this workspace. "
    "To dig deeper into a result, use session_trace for a session's parents and children, "
    "session_event_trace for how an event was replaced or derived, and session_event_read for "
    "an event's full content."
)
MAX_TIMEOUT_MS: Final = 2_147_483_647
OUTPUT_SCHEMA: Final = {"type": "string"}

ExecutionMode = Literal["exclusive", "parallel"]


# --------------------------------------------------------------------------- configuration


@dataclass(frozen=True, slots=True)
class ToolConfig:
    """Validated settings: the result cap of the search tools and their deadline."""

    max_search_results: int = 100
    search_timeout_ms: int = 30_000


TOOL_CONFIG_SCHEMA: Final = {
    "type": "object",
    "properties": {
        "maxSearchResults": {"type": "integer", "minimum": 1, "default": 100},
        "searchTimeoutMs": {"type": "integer", "minimum": 1, "maximum": MAX_TIMEOUT_MS, "default": 30_000},
    },
    "additionalProperties": False,
}
"""The loader's JSON schema of the configuration (integer steps, minimum 1)."""


def _setting(raw: Mapping[str, Any], camel: str, snake: str) -> Any:
    value = raw.get(camel)
    return raw.get(snake) if value is None else value


def validate_tool_config(config: Mapping[str, Any] | ToolConfig | None = None) -> ToolConfig:
    """Check settings given directly (camelCase or snake_case keys); ``TypeError`` if invalid.

    ``maxSearchResults`` must be a positive safe integer; ``searchTimeoutMs``
    an integer from 1 to 2147483647.  Absent keys take the defaults.
    """
    if config is None:
        return ToolConfig()
    if isinstance(config, ToolConfig):
        config = {"maxSearchResults": config.max_search_results, "searchTimeoutMs": config.search_timeout_ms}
    cap = _setting(config, "maxSearchResults", "max_search_results")
    timeout = _setting(config, "searchTimeoutMs", "search_timeout_ms")
    if cap is None:
        cap = 100
    elif not (_is_integral(cap) and 1 <= cap <= MAX_SAFE_INTEGER):
        raise TypeError("maxSearchResults has to be a whole number of at least 1")
    if timeout is None:
        timeout = 30_000
    elif not (_is_integral(timeout) and 1 <= timeout <= MAX_TIMEOUT_MS):
        raise TypeError(f"searchTimeoutMs has to be a whole number from 1 to no greater than {MAX_TIMEOUT_MS}")
    return ToolConfig(int(cap), int(timeout))


def load_tool_config(raw: Mapping[str, Any] | None) -> ToolConfig:
    """Load settings as a config file loader would: :data:`TOOL_CONFIG_SCHEMA`, then defaults.

    Raises ``ValueError`` for anything the schema refuses.
    """
    raw = raw or {}
    for key in raw:
        if key not in TOOL_CONFIG_SCHEMA["properties"]:
            raise ValueError(f"unknown setting {key!r}")
    for key, rule in TOOL_CONFIG_SCHEMA["properties"].items():
        if key not in raw:
            continue
        value = raw[key]
        if not _is_integral(value) or value < rule["minimum"] or value > rule.get("maximum", math.inf):
            raise ValueError(f"{key} does not fit the configuration schema")
    return validate_tool_config(raw)


def _is_integral(value: Any) -> bool:
    if type(value) is int:
        return True
    return type(value) is float and math.isfinite(value) and value.is_integer()


# --------------------------------------------------------------------------- definitions


@dataclass(frozen=True)
class ToolDefinition:
    """One model-facing tool: what the model sees and how the host runs it."""

    name: str
    description: str
    input_schema: Mapping[str, Any]
    execute: Callable[[operations.ToolContext, dict[str, Any]], str]
    concurrency_safe: bool = False
    timeout_ms: int | None = None
    output_schema: Mapping[str, Any] = field(default_factory=lambda: dict(OUTPUT_SCHEMA))

    @property
    def execution_mode(self) -> ExecutionMode:
        """``parallel`` for concurrency-safe tools, ``exclusive`` otherwise."""
        return "parallel" if self.concurrency_safe else "exclusive"

    @property
    def title(self) -> str:
        return _TITLES[self.name]


_TITLES: Final = {
    "session_search": "Search earlier sessions",
    "session_event_search": "Search events of a session",
    "session_trace": "Session lineage",
    "session_event_trace": "Event relations",
    "session_event_read": "Read session event",
}

_DESCRIPTIONS: Final = {
    "session_search": (
        "Full-text search over earlier sessions of this workspace. Each matching session is listed once, "
        "with its strongest matching event and a snippet. The session you are in is never listed. "
        "Every result comes back in one answer (no paging), up to a fixed cap; if the cap is reached, "
        "make the query more specific or add filters."
    ),
    "session_event_search": (
        "Full-text search over the events of one session of this workspace (by default the session you "
        "are in, in which case only events before the current step are searched). Lists each matching "
        "event with its sequence number and a snippet."
    ),
    "session_trace": (
        "Show the family of one session of this workspace: its parent chain and every child session "
        "below it, as far as they are visible from this workspace."
    ),
    "session_event_trace": (
        "Show how one event relates to others in its session: which event replaced it, what it "
        "replaced, which events it cites as sources and which events were derived from it."
    ),
    "session_event_read": (
        "Read one event of a session in full (as JSON), optionally with short summaries of the "
        "events just before and after it."
    ),
}


def build_definitions(config: ToolConfig) -> list[ToolDefinition]:
    """The five tools in their fixed order."""
    timeout = config.search_timeout_ms
    return [
        ToolDefinition("session_search", _DESCRIPTIONS["session_search"], inputs.SESSION_SEARCH_SCHEMA,
                       operations.session_search, timeout_ms=timeout),
        ToolDefinition("session_event_search", _DESCRIPTIONS["session_event_search"],
                       inputs.SESSION_EVENT_SEARCH_SCHEMA, operations.session_event_search, timeout_ms=timeout),
        ToolDefinition("session_trace", _DESCRIPTIONS["session_trace"], inputs.SESSION_TRACE_SCHEMA,
                       operations.session_trace, concurrency_safe=True),
        ToolDefinition("session_event_trace", _DESCRIPTIONS["session_event_trace"],
                       inputs.SESSION_EVENT_TRACE_SCHEMA, operations.session_event_trace, concurrency_safe=True),
        ToolDefinition("session_event_read", _DESCRIPTIONS["session_event_read"], inputs.SESSION_EVENT_READ_SCHEMA,
                       operations.session_event_read, concurrency_safe=True),
    ]


def present_call(name: str, arguments: Mapping[str, Any]) -> dict[str, Any]:
    """The call card a host UI shows for a pending call (generic cards)."""
    if name in ("session_search", "session_event_search"):
        title = "Search earlier sessions" if name == "session_search" else "Search events of a session"
        return {"card": "generic", "kind": "search", "title": title, "rawInput": arguments.get("query")}
    if name == "session_trace":
        session_id = arguments.get("session_id")
        if session_id is None:
            return {"card": "generic", "kind": "read", "title": "Family of this session"}
        return {"card": "generic", "kind": "read", "title": f"Family of session {session_id}", "rawInput": session_id}
    if name in ("session_event_trace", "session_event_read"):
        label = "Relations of event" if name == "session_event_trace" else "Show event"
        raw: dict[str, Any] = {}
        if arguments.get("session_id") is not None:
            raw["session_id"] = arguments["session_id"]
        raw["seq"] = arguments.get("seq")
        return {"card": "generic", "kind": "read", "title": f"{label} {arguments.get('seq')}", "rawInput": raw}
    raise KeyError(name)


# --------------------------------------------------------------------------- results


@dataclass(frozen=True)
class ToolResult:
    """One tool result: a single text block; errors read ``Error: <message>``."""

    text: str
    is_error: bool = False
    code: str | None = None

    def content(self) -> list[dict[str, str]]:
        """The result as content blocks (always exactly one text block)."""
        return [{"type": "text", "text": self.text}]

    @classmethod
    def failure(cls, code: str, message: str) -> ToolResult:
        return cls(f"Error: {message}", True, code)


@dataclass(frozen=True)
class PromptSection:
    """A system-prompt section a host adds while the tools are installed."""

    name: str
    order: int
    text: str


PROMPT_SECTION: Final = PromptSection(PROMPT_SECTION_NAME, PROMPT_SECTION_ORDER, PROMPT_SECTION_TEXT)


class ToolRegistry:
    """A minimal host registry: tools by name and prompt sections by name."""

    def __init__(self) -> None:
        self.tools: dict[str, ToolDefinition] = {}
        self.prompt_sections: dict[str, PromptSection] = {}


_SERVICE_METHODS: Final = (
    "filter_sessions",
    "search_sessions",
    "search_events",
    "trace_session",
    "trace_event",
    "read_event",
    "read_title_snapshots",
)


class SessionTools:
    """The five tools bound to one query service, with one configuration.

    Every result's text passes :func:`readmodel.projection.secrets.redact`
    unless ``redact`` (else ``$SESSIONQ_REDACT``) is ``off``.

    Raises ``TypeError`` for an invalid configuration or a service that lacks
    a required method, before anything is usable.  Thread-safe.
    """

    def __init__(
        self,
        service: Any,
        config: Mapping[str, Any] | ToolConfig | None = None,
        logger: WarningLogger | None = None,
        redact: Policy | None = None,
    ) -> None:
        self.config = validate_tool_config(config)
        # Model-facing text never carries a detected secret unless the policy
        # (``$SESSIONQ_REDACT`` when not given) is ``off``.
        self.redact = redacts_index(policy_from_env(redact))
        missing = [name for name in _SERVICE_METHODS if not callable(getattr(service, name, None))]
        if service is None or missing:
            raise TypeError(f"the session tools need a query service with: {', '.join(missing or _SERVICE_METHODS)}")
        self.service = service
        self.logger: WarningLogger = logger if logger is not None else logging.getLogger("sessionq.tools")
        self.definitions = build_definitions(self.config)
        self._by_name = {definition.name: definition for definition in self.definitions}
        self._gate = ExecutionGate()

    def definition(self, name: str) -> ToolDefinition | None:
        return self._by_name.get(name)

    def register(self, registry: ToolRegistry) -> Callable[[], None]:
        """Install the five tools and the prompt section; returns the disposer that removes them."""
        for definition in self.definitions:
            registry.tools[definition.name] = definition
        registry.prompt_sections[PROMPT_SECTION.name] = PROMPT_SECTION

        def dispose() -> None:
            for definition in self.definitions:
                if registry.tools.get(definition.name) is definition:
                    del registry.tools[definition.name]
            if registry.prompt_sections.get(PROMPT_SECTION.name) is PROMPT_SECTION:
                del registry.prompt_sections[PROMPT_SECTION.name]

        return dispose

    def call(
        self, name: str, arguments: Mapping[str, Any] | None, caller: Caller | None, signal: AbortSignal | None = None
    ) -> ToolResult:
        """Run one tool call to completion; never raises for tool or service failures."""
        definition = self._by_name.get(name)
        if definition is None:
            return ToolResult.failure(TOOL_NOT_FOUND, f"there is no tool called {name!r}")
        try:
            args = inputs.check_schema(definition.input_schema, arguments)
        except ToolError as error:
            return ToolResult.failure(error.code, error.message)
        try:
            with self._gate.enter(not definition.concurrency_safe, signal):
                return self._execute(definition, args, caller, signal)
        except Exception as error:  # the caller's own abort while waiting for the gate
            return self._failure(name, error, signal)

    def _execute(
        self, definition: ToolDefinition, args: dict[str, Any], caller: Caller | None, signal: AbortSignal | None
    ) -> ToolResult:
        """Run one admitted execution under its execution signal (with the deadline, if any)."""
        execution = signal
        if definition.timeout_ms is not None:
            execution = DeadlineSignal(signal, definition.timeout_ms, ToolTimeout(definition.name, definition.timeout_ms))
        try:
            boundary = ServiceBoundary(execution, self.logger)
            context = operations.ToolContext(self.service, caller, boundary, self.config.max_search_results, self.redact)
            text = definition.execute(context, args)
            # The whole rendered text: event JSON, snippets, titles and ids alike.
            return ToolResult(redact_secrets(text) if self.redact else text)
        except Exception as error:
            return self._failure(definition.name, error, execution)
        finally:
            if isinstance(execution, DeadlineSignal):
                execution.close()

    def _failure(self, name: str, error: Exception, signal: AbortSignal | None) -> ToolResult:
        if isinstance(error, ToolError):
            return ToolResult.failure(error.code, error.message)
        if is_aborted(signal) and signal is not None and error is signal.reason:
            return _abort_result(error)
        try:
            self.logger.warning("%s: %s failed unexpectedly: %s", LOG_PREFIX, name, describe_failure(error))
        except Exception:
            pass
        failure = tool_failed()
        return ToolResult.failure(failure.code, failure.message)


def _abort_result(reason: BaseException) -> ToolResult:
    """An abort reason as the model sees it: its message, and its code when it has one."""
    try:
        code = getattr(reason, "code", None)
        message = getattr(reason, "message", None)
        if type(message) is not str:
            message = str(reason)
        return ToolResult.failure(code if type(code) is str else ABORTED, message)
    except Exception:
        return ToolResult.failure(ABORTED, "the call was stopped before it finished")


def call_tool(
    name: str,
    arguments: Mapping[str, Any] | None,
    caller: Caller | None,
    service: Any,
    *,
    config: Mapping[str, Any] | ToolConfig | None = None,
    signal: AbortSignal | None = None,
    logger: WarningLogger | None = None,
) -> ToolResult:
    """One tool call against ``service`` (see :class:`SessionTools`)."""
    return SessionTools(service, config, logger).call(name, arguments, caller, signal)


__all__ = [
    "PROMPT_SECTION",
    "TOOL_CONFIG_SCHEMA",
    "TOOL_NAMES",
    "PromptSection",
    "SessionTools",
    "ToolConfig",
    "ToolDefinition",
    "ToolRegistry",
    "ToolResult",
    "call_tool",
    "load_tool_config",
    "present_call",
    "validate_tool_config",
]
