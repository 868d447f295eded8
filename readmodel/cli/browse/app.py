"""The Textual app of ``sessionq browse``: a search box over the results, and transcript screens.

Threading contract: the UI thread never queries the engine.  Each keystroke
(once the keys queued with it are handled) aborts the search in flight (its
:class:`~readmodel.core.cancel.AbortController`) and starts a worker thread;
the worker's rows are applied only if no later keystroke started another
search (a generation counter), so stale results are dropped, never shown.
Listings and transcripts load in workers the same way.

For tests and the benchmark the app records what it last rendered:
:attr:`BrowserApp.shown_query` and :attr:`BrowserApp.shown_at` (a
``time.perf_counter()`` taken after the screen refreshed with those results).
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable, Sequence
from typing import Any, ClassVar, Self


from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.screen import Screen
from textual.timer import Timer
from textual.widgets import Footer, Input, OptionList, Static
from textual.widgets.option_list import Option

from readmodel.cli.browse.cache import PageCache, Prefetcher, cached_search_rows
from readmodel.cli.browse.lines import Lines, LinesList
from readmodel.cli.browse.rows import Row, Transcript, load_transcript, warm_up, workspace_rows, workspace_session_rows
from readmodel.core.cancel import AbortController, AbortError
from readmodel.core.errors import SessionQueryError

DEBOUNCE_SECONDS = 0.0
"""Quiet time after a keystroke before its search starts (0: none).  Without one, a keystroke's
search starts once the messages already queued are handled, so keys that arrive together (a
burst read in one go) still run one search; slower typing aborts the search in flight.  A
timer costs a keystroke its length plus a few ms of scheduling under load, for nothing."""


PREFETCH_QUIET = 0.5
"""Seconds without a keystroke (results on screen) before the one-character queries are fetched
ahead (:mod:`.cache`); a keystroke aborts the prefetch, so it never delays a search."""

GC_THRESHOLDS = (50_000, 20, 20)
"""The collector's thresholds while the app runs (Python's default: 700, 10, 10).  A keystroke
allocates tens of thousands of short-lived objects (result rows, rendered lines); young
collections every 50,000 allocations instead of every 700 cost less in all and rarely pause a
frame, and full collections become rare (see :meth:`BrowserApp._freeze`)."""


def _failure(exc: BaseException) -> str:
    return exc.message if isinstance(exc, SessionQueryError) else f"{type(exc).__name__}: {exc}"


class TranscriptScreen(Screen[None]):
    """One session's transcript; n/p jump between the query's matches, l shows log-only events."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("n", "match(1)", "next match"),
        Binding("p", "match(-1)", "previous match"),
        Binding("l", "toggle_log", "log-only events"),
        Binding("c", "copy_id", "copy id"),
        Binding("escape,q", "app.pop_screen", "back"),
    ]

    def __init__(self, session_id: str, query: str, seq: int | None) -> None:
        super().__init__()
        self.session_id = session_id
        self.query_text = query
        self.start_seq = seq
        self.transcript: Transcript | None = None
        self.with_log = False
        self.seqs: list[int] = []  # the seq of each option, in order

    def compose(self) -> ComposeResult:
        yield Static(f"loading {self.session_id} …", id="heading")
        yield OptionList(id="events")
        yield Static("", id="where")
        yield Footer()

    def on_mount(self) -> None:
        app = self.browser
        app.in_worker(lambda: load_transcript(app.engine, self.session_id, self.query_text), self._loaded)

    @property
    def browser(self) -> BrowserApp:
        return self.app  # type: ignore[return-value]

    def _loaded(self, transcript: Transcript | BaseException) -> None:
        if isinstance(transcript, BaseException):
            self.query_one("#heading", Static).update(f"cannot open {self.session_id}: {_failure(transcript)}")
            return
        self.transcript = transcript
        self.query_one("#heading", Static).update(transcript.heading)
        target = self.start_seq if self.start_seq is not None else (transcript.matches[0] if transcript.matches else None)
        self._fill(target)
        self.browser.mark_shown(f"transcript:{self.session_id}")

    def _fill(self, seq: int | None) -> None:
        """Show the visible blocks and highlight the one holding ``seq`` (or the nearest before it)."""
        assert self.transcript is not None
        blocks = self.transcript.visible(self.with_log)
        self.seqs = [block.seq for block in blocks]
        events = self.query_one("#events", OptionList)
        events.set_options(Option(block.body) for block in blocks)
        if blocks:
            events.highlighted = self._index_at(seq) if seq is not None else 0
            events.scroll_to_highlight(top=True)
        events.focus()
        self._report()

    def _index_at(self, seq: int) -> int:
        before = [index for index, shown in enumerate(self.seqs) if shown <= seq]
        return before[-1] if before else 0

    @property
    def current_seq(self) -> int | None:
        """The seq of the highlighted event."""
        index = self.query_one("#events", OptionList).highlighted
        return self.seqs[index] if index is not None and index < len(self.seqs) else None

    def _visible_matches(self) -> list[int]:
        shown = set(self.seqs)
        return [seq for seq in self.transcript.matches if seq in shown] if self.transcript else []

    def action_match(self, step: int) -> None:
        matches = self._visible_matches()
        if not matches:
            self.notify("no match of the query in view" + ("" if self.with_log else " (l shows log-only events)"))
            return
        current = self.current_seq
        if current is None:
            target = matches[0]
        elif step > 0:
            target = next((seq for seq in matches if seq > current), matches[0])
        else:
            target = next((seq for seq in reversed(matches) if seq < current), matches[-1])
        events = self.query_one("#events", OptionList)
        events.highlighted = self.seqs.index(target)
        events.scroll_to_highlight(top=True)
        self._report()

    def action_toggle_log(self) -> None:
        if self.transcript is None:
            return
        current = self.current_seq
        self.with_log = not self.with_log
        self._fill(current)

    def action_copy_id(self) -> None:
        self.browser.copy_id(self.session_id)

    def on_option_list_option_highlighted(self, _event: OptionList.OptionHighlighted) -> None:
        self._report()

    def _report(self) -> None:
        current = self.current_seq
        matches = self._visible_matches()
        where = f"event {current}" if current is not None else "no events"
        if current in matches:
            where += f" · match {matches.index(current) + 1} of {len(matches)}"
        elif matches:
            where += f" · {len(matches)} matches (n/p)"
        where += " · log-only events shown" if self.with_log else " · log-only events hidden (l)"
        self.query_one("#where", Static).update(where)


class QueryInput(Input):
    """The search box.  Its size is fixed by the CSS, so a keystroke never changes the layout:
    Textual's Input asks for one on every change of its value (its virtual width follows the
    text), which re-lays and repaints the whole screen — the results included — once per key.
    Here a change repaints the box alone."""

    def refresh(self, *regions: Any, repaint: bool = True, layout: bool = False, recompose: bool = False) -> Self:
        return super().refresh(*regions, repaint=repaint, layout=False, recompose=recompose)


class BrowserApp(App[None]):
    """Search as you type over the whole index; sessions by workspace while the query is empty."""

    TITLE = "sessionq browse"
    # Fixed heights where Textual would otherwise size by content: a keystroke or a new status
    # then repaints its own widget instead of asking for a layout of the whole screen.
    CSS = """
    #query { dock: top; height: 3; }
    #heading { height: auto; max-height: 3; padding: 0 1; }
    /* Below the list, above the footer (a second widget docked at the bottom would sit under it). */
    #status, #where { height: 1; padding: 0 1; color: $text-muted; }
    OptionList { height: 1fr; }
    /* The scroll bar always there: a page that fits the screen after one that did not (or the
       reverse) would otherwise show or hide it, which lays out the whole screen again. */
    #results { width: 1fr; overflow-y: scroll; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "back", "back/quit"),
        Binding("ctrl+y", "copy_id", "copy id"),
        Binding("c", "copy_id", "copy id", show=False),
        Binding("q", "quit", "quit"),
        Binding("ctrl+c", "quit", "quit", show=False, priority=True),
    ]

    def __init__(self, engine: Any, *, debounce: float = DEBOUNCE_SECONDS, query: str = "") -> None:
        super().__init__()
        self.engine = engine
        self.debounce = debounce
        self.initial_query = query
        self.rows: list[Row] = []
        self.workspace: str | None | bool = False  # False: the overview; else the cwd opened
        self.shown_query: str | None = None
        self.shown_at = 0.0
        self._generation = 0
        self._timer: Timer | None = None
        self._pending: str | None = None  # typed, its search not started yet
        self._controller: AbortController | None = None
        self._overview: list[Row] | None = None
        self._overview_options: list[Option] = []  # kept with their painted lines: shown again as they were
        self._thresholds = gc.get_threshold()
        self.cache = PageCache()
        self.prefetcher = Prefetcher(self.cache)
        self._prefetching: AbortController | None = None
        self._quiet: Timer | None = None

    def compose(self) -> ComposeResult:
        yield QueryInput(value=self.initial_query, placeholder="type to search every session · empty: sessions by workspace", id="query")
        # One list for the overview and the results: showing one list and hiding another asked
        # Textual for a layout of the whole screen on a query's first key and its last backspace.
        yield LinesList(id="results")
        yield Static("", id="status")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#query", Input).focus()
        self._start(self.initial_query)
        self.in_worker(lambda: warm_up(self.engine), self._warm)  # a failure shows on the first search

    def _warm(self, _result: Any) -> None:
        self._freeze()
        self._prefetch_when_quiet()

    def _freeze(self) -> None:
        """Start-up is over: hide what lives as long as the app (widgets, styles, the engine's
        caches, the overview) from the garbage collector.  Its full collections otherwise walk
        all of it and pause the screen for 100–400 ms, a few times a minute while typing; the
        garbage of a keystroke is young and still collected.  Called again when the overview
        first arrives (whichever comes last covers both)."""
        gc.freeze()
        gc.set_threshold(*GC_THRESHOLDS)

    def on_unmount(self) -> None:
        self._stop_prefetch()
        gc.set_threshold(*self._thresholds)
        gc.unfreeze()  # a process that runs several apps (the tests) gives their objects back

    # -- workers ---------------------------------------------------------------

    def in_worker(self, call: Callable[[], Any], done: Callable[[Any], None], generation: int | None = None) -> None:
        """Run ``call`` in a thread; hand its result (or exception) to ``done`` on the UI thread,
        unless ``generation`` is given and a later search has started since."""

        def work() -> None:
            try:
                result = call()
            except AbortError:
                return  # superseded by a later keystroke
            except Exception as exc:  # noqa: BLE001 - shown in the status line, never a traceback
                result = exc
            if generation is not None and generation != self._generation:
                return
            try:
                self.call_from_thread(self._deliver, done, result, generation)
            except RuntimeError:
                pass  # the app is gone

        self.run_worker(work, thread=True, exit_on_error=False, group="engine")

    def _deliver(self, done: Callable[[Any], None], result: Any, generation: int | None) -> None:
        if generation is None or generation == self._generation:
            done(result)

    def mark_shown(self, what: str) -> None:
        """Record ``what`` as shown once the screen has refreshed with it."""

        def shown() -> None:
            self.shown_query = what
            self.shown_at = time.perf_counter()

        self.call_after_refresh(shown)

    # -- searching -------------------------------------------------------------

    def _prefetch_when_quiet(self) -> None:
        """(Re)arm the prefetch: it starts once nobody has typed for :data:`PREFETCH_QUIET` seconds."""
        if self._quiet is not None:
            self._quiet.stop()
        self._quiet = self.set_timer(PREFETCH_QUIET, self._prefetch)

    def _prefetch(self) -> None:
        if self._prefetching is not None or self._controller is not None:
            return  # one at a time, never beside a search
        controller = self._prefetching = AbortController()

        def run() -> None:
            try:
                self.prefetcher.run(self.engine, controller.signal)
            except Exception:  # noqa: BLE001 - aborted, or failing as the next search will say
                pass

        def finished(_result: Any) -> None:
            if self._prefetching is controller:
                self._prefetching = None

        self.in_worker(run, finished)

    def _stop_prefetch(self) -> None:
        if self._quiet is not None:
            self._quiet.stop()
            self._quiet = None
        if self._prefetching is not None:
            self._prefetching.abort()
            self._prefetching = None

    def on_input_changed(self, event: Input.Changed) -> None:
        self._stop_prefetch()
        if self._timer is not None:
            self._timer.stop()
        value = event.value
        if self.debounce > 0:
            self._timer = self.set_timer(self.debounce, lambda: self._start(value))
            return
        if self._pending is None:
            self.call_later(self._start_pending)
        self._pending = value

    def _start_pending(self) -> None:
        """Search the latest value typed (the keys queued with it were handled first)."""
        value, self._pending = self._pending, None
        if value is not None:
            self._start(value)

    def _start(self, query: str) -> None:
        self._generation += 1
        generation = self._generation
        if self._controller is not None:
            self._controller.abort()
            self._controller = None
        if query.strip():
            self.workspace = False
            controller = self._controller = AbortController()
            signal = controller.signal
            self.in_worker(lambda: cached_search_rows(self.engine, self.cache, query, signal), lambda rows: self._show(query, rows), generation)
        elif self.workspace is not False:
            cwd = self.workspace
            self.in_worker(lambda: workspace_session_rows(self.engine, cwd), lambda rows: self._show(query, rows), generation)  # type: ignore[arg-type]
        elif self._overview is not None:
            self._show(query, self._overview, overview=True)
        else:
            self._status("loading workspaces …")
            self.in_worker(lambda: workspace_rows(self.engine), lambda rows: self._show(query, rows, overview=True), generation)

    def _status(self, text: str) -> None:
        self.query_one("#status", Static).update(text, layout=False)  # one line, always

    def _show(self, query: str, rows: Sequence[Row] | BaseException, overview: bool = False) -> None:
        """Put ``rows`` on screen; the ``overview``'s options are made once and kept."""
        if isinstance(rows, BaseException):
            self._status(f"error: {_failure(rows)}")
            rows, overview = [], False
        else:
            sessions = sum(row.kind == "session" for row in rows)
            self._status(f"{sessions} best sessions for “{query}”" if query.strip() else f"{sessions} sessions · Enter on a workspace lists all of it")
        self.rows = list(rows)
        shown = self.results_list()
        options = [Option(Lines(row.lines), disabled=row.kind == "note") for row in self.rows] if not overview or self._overview is None else self._overview_options
        if overview and self._overview is None:
            self._overview, self._overview_options = self.rows, options
            self.call_after_refresh(self._freeze)
        shown.set_options(options)
        if self.rows and self.rows[0].kind != "note":
            shown.highlighted = 0
        self.mark_shown(query)
        self._controller = None  # the search (if any) is over
        self._prefetch_when_quiet()

    def results_list(self) -> OptionList:
        """The list on screen (the overview or the results)."""
        return self.query_one("#results", OptionList)

    # -- keys --------------------------------------------------------------------

    def on_key(self, event: Any) -> None:
        """Down arrow in the search box moves to the results."""
        if event.key == "down" and isinstance(self.focused, Input) and self.rows:
            self.results_list().focus()
            event.stop()

    def on_input_submitted(self, _event: Input.Submitted) -> None:
        results = self.results_list()
        if results.highlighted is not None and results.highlighted < len(self.rows):
            self._open(self.rows[results.highlighted])

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        if event.option_list is self.results_list() and event.option_index < len(self.rows):
            self._open(self.rows[event.option_index])

    def _open(self, row: Row) -> None:
        self._stop_prefetch()  # the transcript's own searches go first
        if row.kind == "session" and row.session_id is not None:
            self.push_screen(TranscriptScreen(row.session_id, self.query_one("#query", Input).value, row.seq))
        elif row.kind == "workspace" and self.workspace is False:
            self.workspace = row.cwd
            self._start("")

    def selected_row(self) -> Row | None:
        index = self.results_list().highlighted
        return self.rows[index] if index is not None and index < len(self.rows) else None

    def action_copy_id(self) -> None:
        row = self.selected_row()
        if row is not None and row.session_id is not None:
            self.copy_id(row.session_id)

    def copy_id(self, session_id: str) -> None:
        self.copy_to_clipboard(session_id)
        self.notify(f"copied {session_id}", timeout=2)

    def action_back(self) -> None:
        """Esc: leave an opened workspace, else clear the query, else quit."""
        query = self.query_one("#query", Input)
        if self.workspace is not False and not query.value:
            self.workspace = False
            self._start("")
        elif query.value:
            query.value = ""
            query.focus()
        else:
            self.exit()
