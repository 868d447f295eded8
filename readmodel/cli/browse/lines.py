"""Result rows as Textual visuals that cost next to nothing to lay out and paint.

A row of the results list is a few lines of rich :class:`~rich.text.Text`, each
shown on one screen line and cut with an ellipsis.  Given as plain ``Text``,
Textual's ``OptionList`` converts each row to its own ``Content``, wraps it to
measure its height and formats it again to paint it: at 20 two-line rows that
was most of a keystroke's time on the UI thread (about 15 ms of 25, profiled).
:class:`Lines` knows its height without measuring (one screen line per line),
and paints a line by cutting the ``Text`` to the width once and keeping the
segments per (width, style), so a keystroke's list costs a few strips.

:class:`LinesList` is the ``OptionList`` that paints them from those strips.

Imports: Textual and rich only (no engine): the app wraps each row's lines here.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Self

from rich.console import Console
from rich.segment import Segment
from rich.text import Text
from textual.strip import Strip
from textual.style import Style
from textual.visual import RenderOptions, Visual
from textual.widgets import OptionList
from textual.widgets.option_list import Option

_CONSOLE = Console(width=1000, color_system="truecolor", markup=False, emoji=False, highlight=False)
"""Only turns a ``Text``'s named styles into segments (no output): the app's console is not
thread-bound, but this one keeps the lines independent of it."""


class Lines(Visual):
    """Fixed lines of text, one screen line each, cut with an ellipsis at the width shown."""

    __slots__ = ("lines", "_plain", "_strips", "_painted")

    def __init__(self, lines: Sequence[Text]) -> None:
        self.lines = tuple(lines)
        self._plain: dict[int, list[list[Segment]]] = {}  # width -> each line's segments, cut
        self._strips: dict[tuple[int, Any], list[Strip]] = {}  # (width, style) -> strips
        self._painted: dict[tuple[Any, ...], list[Strip]] = {}  # see painted()

    def _segments(self, width: int) -> list[list[Segment]]:
        found = self._plain.get(width)
        if found is None:
            found = []
            for line in self.lines:
                cut = line.copy()
                cut.truncate(width, overflow="ellipsis")
                found.append([segment for segment in cut.render(_CONSOLE, end="") if segment.text and segment.text != "\n"])  # one screen line
            self._plain = {width: found}  # one width at a time: a resize renders again
        return found

    def render_strips(self, width: int, height: int | None, style: Style, options: RenderOptions) -> list[Strip]:
        """The lines cut to ``width`` over ``style`` (the list's base or highlighted style)."""
        if width <= 0:
            return []
        key = (width, style)
        strips = self._strips.get(key)
        if strips is None:
            base = style.rich_style
            strips = [Strip(segments).apply_style(base).extend_cell_length(width, base) for segments in self._segments(width)]
            if len(self._strips) > 8:  # a row is shown in few styles (base, highlighted, hovered)
                self._strips.clear()
            self._strips[key] = strips
        return strips if height is None else strips[:height]

    def painted(self, width: int, style: Style, left: int, right: int, meta: dict[str, Any]) -> list[Strip]:
        """The lines as a list row paints them: ``left`` and ``right`` cells of padding around the
        text, ``width`` cells in all, over ``style``, tagged with ``meta`` (which option a click hits).
        Kept per arguments, so a page shown again (a kept search) is painted from what it was."""
        key = (width, style, left, right, tuple(meta.items()))
        strips = self._painted.get(key)
        if strips is None:
            base = style.rich_style
            pad = [Segment(" " * left, base)] if left > 0 else []
            strips = [
                Strip([*pad, *Strip(segments).apply_style(base)]).extend_cell_length(width, base).crop(0, width).apply_meta(meta)
                for segments in self._segments(max(0, width - left - right))
            ]
            if len(self._painted) > 8:  # a row is shown in few styles (base, highlighted, hovered)
                self._painted.clear()
            self._painted[key] = strips
        return strips

    def get_optimal_width(self, rules: Any, container_width: int) -> int:
        return max((line.cell_len for line in self.lines), default=0)

    def get_height(self, rules: Any, width: int) -> int:
        return len(self.lines)


class LinesList(OptionList):
    """An ``OptionList`` that paints :class:`Lines` options from the strips they keep, skipping
    the generic path (a visual rendered, padded, extended and tagged again on every change).

    Its size is fixed by the app's CSS (``1fr`` both ways, the scroll bar always shown), so it
    never asks for a layout: Textual's list asks for one of the whole screen whenever its number
    of lines changes (its virtual size), i.e. on most keystrokes, to no effect on its size.
    """

    def refresh(self, *regions: Any, repaint: bool = True, layout: bool = False, recompose: bool = False) -> Self:
        return super().refresh(*regions, repaint=repaint, layout=False, recompose=recompose)

    def _get_option_render(self, option: Option, style: Style) -> list[Strip]:
        prompt = option.prompt
        padding = self.get_component_styles("option-list--option").padding
        if not isinstance(prompt, Lines) or option._divider or padding.top or padding.bottom:
            return super()._get_option_render(option, style)
        width = self.scrollable_content_region.width - self._get_left_gutter_width()
        return prompt.painted(width, style, padding.left, padding.right, {"option": self._option_to_index[option]})
