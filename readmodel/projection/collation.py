"""JavaScript ``String.prototype.localeCompare`` order for session ids.

The reference sorts session ids with ``a.localeCompare(b)`` (no arguments), which
in Node is ICU collation for the ``en-US`` locale: the CLDR root collation at
tertiary strength with punctuation *not* ignored.  That is neither code-point
order nor case-insensitive order (query-spec.md §1.5)::

    _x  <  -x  <  1  <  a  <  A  <  b  <  B

No ICU binding is available to the project, so this module builds a three-level
sort key in the spirit of the Unicode Collation Algorithm:

* **primary** — the base character: whitespace, then punctuation, then
  symbols, then currency signs, then digits (by numeric value), then letters
  (Latin first, other scripts after it, Han ideographs last).  Letters ignore
  case and accents at this level.
* **secondary** — accents (combining marks, in ICU's secondary order) and the
  "stroke/ligature" letters that ICU sorts as plain letters (``ø`` ~ ``o``,
  ``æ`` ~ ``ae``, ``ß`` ~ ``ss``).
* **tertiary** — case (lower before upper) and compatibility variants
  (full-width, circled, superscript...), with the weights of the UCA tertiary
  table.

Strings are compared level by level over the whole string, exactly like ICU: a
primary difference anywhere beats any secondary difference, and so on.  Strings
equal at all three levels compare equal (``localeCompare`` returns 0), so a
stable sort keeps their input order — as the reference's stable sort does.

Control and format characters (NUL, ZERO WIDTH JOINER, variation selectors...)
are ignorable, as in ICU.

Fidelity: the order of every ASCII character, of the Latin-1, General
Punctuation, arrow, currency and CJK punctuation blocks, of the Latin letters
up to U+024F and of the combining diacritics U+0300–U+036F was taken from ICU
(Node 20, ICU 7x, ``en-US``) and is reproduced exactly.  Outside those tables
the key falls back to Unicode data (NFD/NFKD decomposition, general category,
script taken from the character name, code point within a script); known
divergences from ICU are limited to the relative order of characters *inside*
the fallback buckets (for example two emoji of one block, some CJK marks, or two
letters of an Indic script).  Checked against Node's ``localeCompare``: no
difference on 15,000 id-like strings (ASCII, accents, CJK, emoji, spaces,
punctuation), and about 1 pair in 10,000 on random strings drawn from exotic
blocks.

ICU root order of the printable ASCII characters (the one this module
reproduces, ``' '`` first)::

     _-,;:!?.'"()[]{}@*/\\&#%`^+<=>|~$0123456789aAbBcC...zZ
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable
from functools import lru_cache
from typing import Final

from readmodel.core.jsvalues import is_number
from readmodel.core.vocabulary import SessionRecord

CollationElement = tuple[int, int, int]
"""``(primary, secondary, tertiary)``; 0 at a level means "ignorable there"."""

CollationKey = tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]
"""Per-level weight sequences; plain tuple comparison gives the ICU order."""

# --------------------------------------------------------------------------
# Weights.  Primaries are "slot << _SUB_BITS | sub": the slot orders groups,
# the sub orders characters that share a fallback slot (by code point).
# --------------------------------------------------------------------------
_SUB_BITS: Final = 22
_SEC: Final = 0x05  # secondary weight of an unaccented character
_MARK_BASE: Final = 0x10  # secondary weights of combining marks start here
_UNKNOWN_MARK_BASE: Final = 0x1000  # marks outside the ICU table, by code point
_LIGATURE_SECONDARY: Final = 0x0F00  # secondary of "æ", "ð", "ß"...: after every tabled mark

# Tertiary weights, from the UCA tertiary weight table: lowercase (and caseless)
# first, then uppercase; compatibility variants by decomposition tag.
_T_LOWER: Final = 0x02
_T_UPPER: Final = 0x08
_T_SMALL_HIRAGANA: Final = 0x0D
_T_HIRAGANA: Final = 0x0E
_T_SMALL_KATAKANA: Final = 0x0F
_T_KATAKANA: Final = 0x11
_T_CIRCLED_KATAKANA: Final = 0x13

#: ``tag -> (tertiary for a lowercase/caseless part, tertiary for an uppercase part)``
_TAG_TERTIARY: Final[dict[str, tuple[int, int]]] = {
    "<wide>": (0x03, 0x09), "<compat>": (0x04, 0x0A), "<font>": (0x05, 0x0B),
    "<circle>": (0x06, 0x0C), "<narrow>": (0x12, 0x12), "<small>": (0x0D, 0x0D),
    "<super>": (0x14, 0x15), "<sub>": (0x16, 0x17), "<vertical>": (0x18, 0x18),
    "<initial>": (0x19, 0x19), "<medial>": (0x1A, 0x1A), "<final>": (0x1B, 0x1B),
    "<isolated>": (0x1C, 0x1C), "<noBreak>": (0x1D, 0x1D), "<square>": (0x1E, 0x1F),
    "<fraction>": (0x1E, 0x1F),
}

#: ICU root primary order of the modelled whitespace, punctuation, symbol and
#: currency characters.  Each string is one primary weight; characters inside a
#: string (the quotation-mark families) differ only at a lower level, in the
#: order written.  ``_ARROWS`` stands for U+2190..U+21FF in code point order
#: (the few decomposable arrows there get their order from NFD instead).
_ARROWS: Final = "<arrows>"
_NON_LETTER_ORDER: Final[tuple[str, ...]] = (
    "\x09", "\x0a", "\x0b", "\x0c", "\x0d", "\x85", "\u2028", "\u2029", "\x20", "\u203e", "_\u2017", "-", "\u2010",
    "\u2012", "\u2013", "\u2014", "\u2015", "\u2053", "\u301c", "\u3030", ",", "\u3001", ";",
    "\u204f", ":", "!", "\xa1", "?", "\xbf", "\u203d", ".", "\u3002", "\xb7", "\u2055", "\u2056",
    "\u2058", "\u2059", "\u205a", "\u205b", "\u205c", "\u205d", "\u205e",
    "'\u2018\u2019\u201a\u201b", "\u2039", "\u203a",
    "\x22\u201c\u201d\u201e\u201f\u301d\u301e\u301f", "\xab", "\xbb", "(", ")", "[", "]", "{", "}",
    "\u2045", "\u2046", "\u3008", "\u3009", "\u300a", "\u300b", "\u300c", "\u300d", "\u300e",
    "\u300f", "\u3010", "\u3011", "\u3014", "\u3015", "\u3016", "\u3017", "\u3018", "\u3019",
    "\u301a", "\u301b", "\u2016", "\xa7", "\xb6", "\u204b", "@", "*", "\u204e", "\u2051", "/",
    "\x5c", "&", "\u204a", "#", "%", "\u2030", "\u2031", "\u2020", "\u2021", "\u2022", "\u2023",
    "\u2027", "\u2043", "\u204c", "\u204d", "\u2032", "\u2035", "\u3003", "\u303d", "\u2038",
    "\u203b", "\u203f", "\u2054", "\u2040", "\u2050", "\u2041", "\u2042",
    # spacing accents and modifier symbols
    "`", "\xb4", "\u02dc", "^", "\xaf", "\u02d8", "\u02d9", "\xa8", "\u02da", "\u02dd", "\xb8",
    "\u02db", "\u02c2", "\u02c3", "\u02c4", "\u02c5", "\u02d2", "\u02d3", "\u02d4", "\u02d5",
    "\u02d6", "\u02d7", "\u02de", "\u02df", "\u02e5", "\u02e6", "\u02e7", "\u02e8", "\u02e9",
    "\u02ea", "\u02eb", "\u02ed", "\u02ef", "\u02f0", "\u02f1", "\u02f2", "\u02f3", "\u02f4",
    "\u02f5", "\u02f6", "\u02f7", "\u02f8", "\u02f9", "\u02fa", "\u02fb", "\u02fc", "\u02fd",
    "\u02fe", "\u02ff",
    "\xb0", "\xa9", "\xae", _ARROWS, "+", "\xb1", "\xf7", "\xd7", "<", "=", ">", "\xac", "|", "\xa6", "~",
    "\u2052", "\u2044", "\u3004", "\u3012", "\u3013", "\u3020", "\u3037", "\u303e", "\u303f",
    # CJK iteration and length marks sort between the symbols and the currency signs
    "\u3005", "\u303b", "\u3031", "\u3032", "\u3033\u3034", "\u3035", "\u309d", "\u30fc",
    "\u30fd",
    "\xa4", "\xa2", "$", "\xa3", "\xa5", "\u20a0", "\u20a1", "\u20a2", "\u20a3", "\u20a4",
    "\u20a5", "\u20a6", "\u20a9", "\u20aa", "\u20ab", "\u20ac", "\u20ad", "\u20ae", "\u20af",
    "\u20b0", "\u20b1", "\u20b2", "\u20b3", "\u20b4", "\u20b5", "\u20b6", "\u20b7", "\u20b8",
    "\u20b9", "\u20ba", "\u20bb", "\u20bc", "\u20bd", "\u20be", "\u20bf", "\u20c0", "\u20a7",
)

#: ICU root primary order of the Latin letters up to U+024F that do not
#: decompose to an ASCII letter plus accents.  Space-separated groups share a
#: primary weight (a lowercase letter and its capital).
_LATIN_ORDER: Final = (
    "a \u023a b \u0180\u0243 \u0181 \u0183\u0182 c \u023c\u023b \u0188\u0187 d \u0189 \u018a "
    "\u018c\u018b \u0221 \u1e9f e \u0247\u0246 \u01dd\u018e \u018f \u0190 f \u0192\u0191 g "
    "\u01e5\u01e4 \u0193 \u0194 \u01a3\u01a2 h \u0195\u01f6 i \u0131 \u0197 \u0196 j \u0237 "
    "\u0249\u0248 k \u0199\u0198 l \u019a\u023d \u0234 \u019b m n \u019d \u019e\u0220 \u0235 "
    "\u014b\u014a o \u0186 \u019f \u0223\u0222 p \u01a5\u01a4 q \u024b\u024a \u0138 r \u01a6 "
    "\u024d\u024c s \u023f \u1e9c \u1e9d \u01a9 \u01aa t \u0167\u0166 \u023e \u01ab \u01ad\u01ac "
    "\u01ae \u0236 u \u0244 \u019c \u01b1 v \u01b2 \u1efd\u1efc \u0245 w x y \u024f\u024e "
    "\u01b4\u01b3 \u1eff\u1efe \u021d\u021c z \u01b6\u01b5 \u0225\u0224 \u0240 \u0292\u01b7 "
    "\u01b9\u01b8 \u01ba \u00fe\u00de \u01bf\u01f7 \u01bb \u01a8\u01a7 \u01bd\u01bc \u0185\u0184 "
    "\u0242\u0241 \u0149 \u01c0 \u01c1 \u01c2 \u01c3"
)

#: Latin letters that ICU sorts as one or two ASCII letters, and how it tells
#: them apart: ``"\u0338"``/``"\u0335"`` = like that overlay mark on the first
#: letter, ``"+"`` = a secondary weight after every tabled mark, ``""`` = a
#: tertiary difference only.  (Capitals map through their lowercase form.)
_LATIN_EXPANSIONS: Final[dict[str, tuple[str, str]]] = {
    "\u00e6": ("ae", "+"), "\u00f0": ("d", "+"), "\u00f8": ("o", "\u0338"), "\u00df": ("ss", "+"),
    "\u0111": ("d", "\u0335"), "\u0127": ("h", "\u0335"), "\u0142": ("l", "\u0335"),
    "\u0153": ("oe", "+"), "\u018d": ("zw", ""), "\u01be": ("ts", ""), "\u0238": ("db", ""),
    "\u0239": ("qp", ""), "\u1efb": ("ll", ""),
}

#: ICU secondary order of the combining diacritics U+0300..U+036F (hex code
#: points; ``=`` joins marks that share a weight).  U+034F COMBINING GRAPHEME
#: JOINER is ignorable and therefore absent.
_MARK_ORDER: Final = (
    "332 313=343 314 301=341 300=340 306 302 30C 30A 342 308 344 30B 303 307 338 327 328 304 "
    "30D=30E=312=315=31A=33D=33E=33F=346=34A=34B=34C=350=351=352=357=35B=35D=35E "
    "316=317=318=319=31C=31D=31E=31F=320=329=32A=32B=32C=32F=333=33A=33B=33C=347=348=349=34D="
    "34E=353=354=355=356=359=35A=35C=35F=362 336=337 335 305 309 30F 310 311 31B 321 322 323 "
    "324 325 326 32D 32E 330 331 334 339 345 358 360 361 363 368 369 364 36A 365 36B 366 36C "
    "36D 367 36E 36F"
)

#: Scripts after Latin, in CLDR root order, recognised by the first word(s) of
#: the Unicode character name.
_SCRIPT_ORDER: Final[tuple[str, ...]] = (
    "GREEK", "COPTIC", "CYRILLIC", "GLAGOLITIC", "GEORGIAN", "ARMENIAN", "HEBREW", "ARABIC",
    "SYRIAC", "THAANA", "NKO", "DEVANAGARI", "BENGALI", "GURMUKHI", "GUJARATI", "ORIYA", "TAMIL",
    "TELUGU", "KANNADA", "MALAYALAM", "SINHALA", "THAI", "LAO", "TIBETAN", "MYANMAR", "ETHIOPIC",
    "CHEROKEE", "CANADIAN", "OGHAM", "RUNIC", "KHMER", "MONGOLIAN", "HANGUL", "HIRAGANA",
    "BOPOMOFO", "YI",
)

#: Characters ICU ignores completely although Unicode does not class them as
#: controls: the grapheme joiner, variation selectors and ARABIC TATWEEL.
_IGNORABLE: Final = frozenset(
    [0x034F, 0x0640, *range(0xFE00, 0xFE10), *range(0xE0100, 0xE01F0), *range(0x180B, 0x180E)]
)


def _non_letter_table() -> tuple[dict[str, CollationElement], dict[str, int]]:
    """Collation elements of the tabled non-letters, and the fallback slots.

    Slots are spaced by 2 so that an untabled character can get the odd slot
    right after the last tabled character of its class (``fallback[class]``).
    """
    elements: dict[str, CollationElement] = {}
    fallback: dict[str, int] = {}
    slot = 2
    for group in _NON_LETTER_ORDER:
        arrows = group is _ARROWS
        members = [chr(cp) for cp in range(0x2190, 0x2200)] if arrows else list(group)
        for index, member in enumerate(members):
            if arrows:
                slot += 2
            # members of a quotation-mark family share the primary; index = tertiary step
            elements[member] = (slot << _SUB_BITS, _SEC, _T_LOWER + (0 if arrows else index))
            bucket = _fallback_class(member)
            if bucket in ("space", "punct", "currency"):
                fallback[bucket] = slot + 1
            elif arrows:
                fallback["math"] = slot + 1
            elif member == "\u2044":
                # untabled pictographs (emoji, dingbats...) follow FRACTION SLASH
                fallback["pictograph"] = slot + 1
        slot += 2
    fallback["digit"] = slot
    return elements, fallback


def _latin_table() -> dict[str, int]:
    """Lowercase Latin letter -> slot (relative to the start of the letters)."""
    latin: dict[str, int] = {}
    slot = 2
    for group in _LATIN_ORDER.split(" "):
        for member in group:
            latin[member.lower()] = slot
        slot += 2
    latin["<other>"] = slot  # untabled Latin letters follow the last tabled one
    return latin


def _mark_table() -> dict[str, int]:
    """Combining mark -> secondary weight."""
    marks: dict[str, int] = {}
    for rank, same in enumerate(_MARK_ORDER.split()):
        for hexcode in same.split("="):
            marks[chr(int(hexcode, 16))] = _MARK_BASE + rank
    return marks


def _fallback_class(char: str) -> str:
    """The bucket an untabled character joins: space, punct, math, pictograph or currency."""
    category = unicodedata.category(char)
    if category == "Sc":
        return "currency"
    if category == "Sm" and 0x2200 <= ord(char) <= 0x22FF:
        return "math"
    if category[0] == "S":
        return "pictograph"
    if category[0] == "P":
        return "punct"
    if category[0] == "L":
        return "letter"
    return "space"


#: ICU's order of the supplementary symbol blocks (emoji live there); symbols
#: of the Basic Multilingual Plane come first, in code point order.
_SYMBOL_BLOCKS: Final[tuple[tuple[int, int], ...]] = (
    (0x1D100, 0x1D1FF), (0x1F000, 0x1F0FF), (0x1FA00, 0x1FA6F), (0x1F300, 0x1F5FF),
    (0x1F900, 0x1F9FF), (0x1FA70, 0x1FAFF), (0x1F600, 0x1F64F), (0x1F680, 0x1F6FF),
    (0x1F700, 0x1F77F), (0x1F780, 0x1F7FF), (0x1F800, 0x1F8FF),
)


def _symbol_sub(code: int) -> int:
    """Order inside the pictograph bucket: BMP by code point, then ICU's block order."""
    if code <= 0xFFFF:
        return code
    for rank, (low, high) in enumerate(_SYMBOL_BLOCKS, start=1):
        if low <= code <= high:
            return (rank << 17) | (code & 0x1FFFF)
    return ((len(_SYMBOL_BLOCKS) + 1) << 17) | (code & 0x1FFFF)


_NON_LETTERS, _FALLBACK_SLOTS = _non_letter_table()
_LATIN_SLOTS: Final = _latin_table()
_MARK_WEIGHTS: Final = _mark_table()

# Slot layout after the non-letters: digits, Latin, other scripts, Han, the rest.
_DIGIT_SLOT: Final = _FALLBACK_SLOTS["digit"]
_OTHER_NUMBER_SLOT: Final = _DIGIT_SLOT + 1
_LATIN_BASE: Final = _DIGIT_SLOT + 2
_SCRIPT_BASE: Final = _LATIN_BASE + _LATIN_SLOTS["<other>"] + 2
_OTHER_LETTER_SLOT: Final = _SCRIPT_BASE + 2 * len(_SCRIPT_ORDER)
_HAN_SLOT: Final = _OTHER_LETTER_SLOT + 2
_LAST_SLOT: Final = _HAN_SLOT + 6


def _primary(slot: int, sub: int = 0) -> int:
    return (slot << _SUB_BITS) | sub


@lru_cache(maxsize=65536)
def _elements(char: str) -> tuple[CollationElement, ...]:
    """Collation elements of one character of an NFD-normalised string."""
    tabled = _NON_LETTERS.get(char)
    if tabled is not None:
        return (tabled,)
    category = unicodedata.category(char)
    code = ord(char)
    if code in _IGNORABLE:
        return ()
    if category in ("Mn", "Me", "Mc"):
        return _mark_elements(char, code)
    if category in ("Cc", "Cf"):
        return ()  # controls and format characters are ignorable in ICU
    if category == "Cs" or category == "Co" or category == "Cn":
        return ((_primary(_LAST_SLOT, code), _SEC, _T_LOWER),)
    compat = unicodedata.normalize("NFKD", char)
    if _sorts_as_expansion(char, compat):
        return _variant_elements(char, compat)
    if category[0] == "N":
        return _number_elements(char, code)
    if category[0] == "L":
        return _letter_elements(char, code)
    bucket = _fallback_class(char)
    sub = _symbol_sub(code) if bucket == "pictograph" else code
    return ((_primary(_FALLBACK_SLOTS[bucket], sub), _SEC, _T_LOWER),)


def _sorts_as_expansion(char: str, compat: str) -> bool:
    """Whether ICU weights ``char`` as its compatibility decomposition.

    Spacing accents (``¨``, ``´``, ``¸``: NFKD = space + mark) are the
    exception: ICU gives them symbol weights of their own.
    """
    if compat == char or char in _LATIN_EXPANSIONS or char.lower() in _LATIN_SLOTS:
        return False
    return not (len(compat) > 1 and compat[0] == " ")


def _number_elements(char: str, code: int) -> tuple[CollationElement, ...]:
    """Digits of every script share the weights of their value; other numbers
    (fractions without a decomposition, Roman numerals...) follow the digits."""
    value = unicodedata.numeric(char, -1.0)
    if value in (0, 1, 2, 3, 4, 5, 6, 7, 8, 9):
        # ICU: "٢" and "2" are equal even at tertiary strength
        return ((_primary(_DIGIT_SLOT, int(value)), _SEC, _T_LOWER),)
    return ((_primary(_OTHER_NUMBER_SLOT, code), _SEC, _T_LOWER),)


def _mark_elements(char: str, code: int) -> tuple[CollationElement, ...]:
    """A combining mark only carries a secondary weight (an accent).

    Exception: the combining Latin letters U+0363..U+036F, which ICU weights as
    the letter they show (a compatibility variant of it).
    """
    if 0x0363 <= code <= 0x036F:
        letter = unicodedata.name(char)[-1].lower()  # "COMBINING LATIN SMALL LETTER A"
        primary = _primary(_LATIN_BASE + _LATIN_SLOTS[letter])
        return ((primary, _SEC, _TAG_TERTIARY["<super>"][0]),)
    weight = _MARK_WEIGHTS.get(char, _UNKNOWN_MARK_BASE + code)
    return ((0, weight, _T_LOWER),)


def _variant_elements(char: str, compat: str) -> tuple[CollationElement, ...]:
    """A compatibility character sorts as its NFKD expansion with the tertiary
    weight of its decomposition tag (``1 < １ < ① < ¹``, ``A < Ａ``, ``TM < ™``)."""
    decomposition = unicodedata.decomposition(char)
    tag = decomposition.split(" ", 1)[0] if decomposition.startswith("<") else "<compat>"
    lower, upper = _TAG_TERTIARY.get(tag, _TAG_TERTIARY["<compat>"])
    out: list[CollationElement] = []
    for part in compat:
        for primary, secondary, tertiary in _elements(part):
            if primary:
                tertiary = _variant_tertiary(tertiary, tag, lower, upper)
            out.append((primary, secondary, tertiary))
    return tuple(out)


def _variant_tertiary(tertiary: int, tag: str, lower: int, upper: int) -> int:
    """Tertiary weight of one part of a compatibility expansion."""
    if tertiary == _T_UPPER:
        return upper
    if tertiary in (_T_SMALL_KATAKANA, _T_KATAKANA):
        if tag == "<narrow>":
            return tertiary + 1  # half-width katakana right after the full-width one
        if tag == "<circle>":
            return _T_CIRCLED_KATAKANA
    return lower


def _case_split(char: str) -> tuple[str, int]:
    """Lowercase form used for the primary weight, and the tertiary case weight."""
    lower = char.lower()
    if len(lower) == 1 and lower != char:
        return lower, _T_UPPER
    return char, _T_LOWER


def _letter_elements(char: str, code: int) -> tuple[CollationElement, ...]:
    """Letters: Latin from the ICU tables, other scripts by name, Han last."""
    base, case = _case_split(char)
    expansion = _LATIN_EXPANSIONS.get(base)
    if expansion is not None:
        return _expansion_elements(expansion, case)
    if base.isascii():
        slot = _LATIN_BASE + _LATIN_SLOTS[base]
        return ((_primary(slot), _SEC, case),)
    latin_slot = _LATIN_SLOTS.get(base)
    if latin_slot is not None:
        return ((_primary(_LATIN_BASE + latin_slot), _SEC, case),)
    return (_script_element(base, case, code),)


def _expansion_elements(expansion: tuple[str, str], case: int) -> tuple[CollationElement, ...]:
    """"æ" → a,e; "ø" → o; "ß" → s,s; told apart as :data:`_LATIN_EXPANSIONS` says.

    ICU: ``ae < AE < æ < Æ < af``, ``o < ô < ø < p`` and ``ss < SS < ß < ẞ < st``.
    """
    letters, difference = expansion
    if difference == "":
        case = _TAG_TERTIARY["<compat>"][1 if case == _T_UPPER else 0]
    out: list[CollationElement] = []
    for index, letter in enumerate(letters):
        out.append((_primary(_LATIN_BASE + _LATIN_SLOTS[letter]), _SEC, case))
        if index == 0 and difference:
            secondary = _LIGATURE_SECONDARY if difference == "+" else _MARK_WEIGHTS[difference]
            out.append((0, secondary, _T_LOWER))
    return tuple(out)


def _script_element(base: str, case: int, code: int) -> CollationElement:
    """Primary for a letter outside the Latin tables."""
    name = unicodedata.name(base, "")
    if name.startswith("CJK UNIFIED IDEOGRAPH") or name.startswith("CJK COMPATIBILITY IDEOGRAPH"):
        # ICU's implicit weights: the core block, then extension A, then the rest.
        core = 0x4E00 <= code <= 0x9FFF or 0xF900 <= code <= 0xFAFF
        ext_a = 0x3400 <= code <= 0x4DBF
        return (_primary(_HAN_SLOT + (0 if core else 2 if ext_a else 4), code), _SEC, _T_LOWER)
    if name.startswith("LATIN"):
        return (_primary(_LATIN_BASE + _LATIN_SLOTS["<other>"], ord(base)), _SEC, case)
    if name.startswith(("HIRAGANA LETTER ", "KATAKANA LETTER ")):
        return _kana_element(name)
    for index, script in enumerate(_SCRIPT_ORDER):
        if name.startswith(script):
            return (_primary(_SCRIPT_BASE + 2 * index, ord(base)), _SEC, case)
    return (_primary(_OTHER_LETTER_SLOT, ord(base)), _SEC, case)


def _kana_element(name: str) -> CollationElement:
    """Kana: small and katakana forms share the plain hiragana letter's primary.

    ICU's tertiary order is ``ぁ < あ < ァ < ｧ < ア < ｱ`` (half-width forms
    arrive here through NFKD, see :func:`_variant_tertiary`).
    """
    katakana = name.startswith("KATAKANA")
    plain = name.replace("SMALL ", "").replace("KATAKANA", "HIRAGANA")
    try:
        sub = ord(unicodedata.lookup(plain))
    except KeyError:  # a katakana letter with no hiragana twin (ヷ, ヸ...)
        sub = ord(unicodedata.lookup(name.replace("SMALL ", "")))
    small = "SMALL " in name
    if katakana:
        tertiary = _T_SMALL_KATAKANA if small else _T_KATAKANA
    else:
        tertiary = _T_SMALL_HIRAGANA if small else _T_HIRAGANA
    slot = _SCRIPT_BASE + 2 * _SCRIPT_ORDER.index("HIRAGANA")
    return (_primary(slot, sub), _SEC, tertiary)


def locale_compare_key(text: str) -> CollationKey:
    """Sort key such that ``key(a) < key(b)`` iff ``a.localeCompare(b) < 0`` in the reference.

    Contract: pure, deterministic, total on ``str`` (lone surrogates included).
    Equal keys mean ICU considers the strings equal at tertiary strength.
    """
    primaries: list[int] = []
    secondaries: list[int] = []
    tertiaries: list[int] = []
    for char in unicodedata.normalize("NFD", text):
        for primary, secondary, tertiary in _elements(char):
            if primary:
                primaries.append(primary)
            if secondary:
                secondaries.append(secondary)
            if tertiary:
                tertiaries.append(tertiary)
    return tuple(primaries), tuple(secondaries), tuple(tertiaries)


def locale_compare(left: str, right: str) -> int:
    """``left.localeCompare(right)`` reduced to its sign: -1, 0 or 1."""
    a, b = locale_compare_key(left), locale_compare_key(right)
    return (a > b) - (a < b)


def _created_at(record: SessionRecord) -> float | int:
    """``header.createdAt`` as the reference subtracts it (validated to be a number upstream)."""
    value = record.header.get("createdAt")
    if not is_number(value):
        raise TypeError(f"session {record.header.get('id')!r} has a non-numeric createdAt")
    return value


def sort_records_newest_first(records: Iterable[SessionRecord]) -> list[SessionRecord]:
    """The listing order of query-spec.md §1.5: ``createdAt`` descending, then id by
    ``localeCompare`` ascending; stable, so collation-equal ids keep input order.

    Returns a new list holding the same record objects (no cloning).
    """
    return sorted(records, key=lambda r: (-_created_at(r), locale_compare_key(r.header["id"])))


def sort_records_oldest_first(records: Iterable[SessionRecord]) -> list[SessionRecord]:
    """The lineage children order of query-spec.md §5.1 step 3: ``createdAt``
    ascending, then id by ``localeCompare`` ascending; stable."""
    return sorted(records, key=lambda r: (_created_at(r), locale_compare_key(r.header["id"])))
