/*
 * A log's own bytes as its events' raw lines (an optional accelerator).
 *
 * A raw block stores each event as msgspec's compact JSON of it
 * (readmodel.store.blocks.encode_events).  Harness logs are written that way
 * already: a line the reader decoded an event from is, byte for byte, the
 * line encoding the event gives back, unless something in it is spelled
 * another way.  Re-encoding every event took a long log's reading stage 15%
 * of its CPU; copying the line it came from takes a scan of its bytes.
 *
 * canonical(line) says whether ``line`` is proven to be msgspec's encoding of
 * the value msgspec decodes from it (False: not proven, which is no defect):
 * one JSON value with no white space outside strings; strings whose escapes
 * are exactly those msgspec writes (\" \\ \b \f \n \r \t, and \u00xx in lower
 * case for the other control characters) and that hold no raw control
 * character; integers of at most MAX_INT_DIGITS digits other than -0 (a
 * number with a fraction or an exponent is not proven: msgspec writes floats
 * its own shortest way); objects without a repeated key (the decoder keeps
 * the last, and the encoding has it once), at most MAX_OBJECT_KEYS keys and
 * MAX_DEPTH levels deep.  Bytes of 0x7f and above stand for themselves, as
 * msgspec writes them (the decoder has checked they are UTF-8).
 *
 * line_starts(region) is the offset of each line of a region that ends with a
 * line feed, and the region's length after them, as native Py_ssize_t values
 * in one bytes object (computed once per region, read by every batch).
 *
 * join_lines(items, values, base, region, starts, fallback) is
 * b"".join(fallback(item) for item in items) for a ``fallback`` that returns
 * an item's LF-terminated raw lines (indexer.projection.encode_items of the
 * one item), except that an item that *is* ``values[base + i]`` (the very
 * object decoded from line ``base + i`` of ``region``, which no stage of the
 * reader changes) and whose line is canonical is written as that line.  The
 * caller passes ``base`` only while ``items`` are aligned with the lines (one
 * item per line, in order); an item that is not its line's object (an
 * upgraded event, a packed row) simply takes the fallback.
 *
 * Without the extension the projector encodes every event, with the same
 * bytes as result (property tests hold the two equal).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <string.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#define MAX_DEPTH 64
#define MAX_OBJECT_KEYS 64
#define MAX_KEYS 512 /* the keys of every open object of one line together */
#define MAX_INT_DIGITS 18

typedef struct {
    const unsigned char *p;
    const unsigned char *end;
    Py_ssize_t keys;
    const unsigned char *key_at[MAX_KEYS];
    Py_ssize_t key_len[MAX_KEYS];
} Scan;

static int scan_value(Scan *s, int depth);

/* The first byte at or after p (before end) that is a quote, a backslash or a control character, or end. */
static const unsigned char *next_special(const unsigned char *p, const unsigned char *end) {
#if defined(__SSE2__)
    /* Most of a log's bytes are long strings' plain characters: 16 at a time. */
    const __m128i quote = _mm_set1_epi8('"'), backslash = _mm_set1_epi8('\\'), control = _mm_set1_epi8(0x1f);
    while (end - p >= 16) {
        __m128i bytes = _mm_loadu_si128((const __m128i *)p);
        __m128i hits = _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(bytes, quote), _mm_cmpeq_epi8(bytes, backslash)),
                                    _mm_cmpeq_epi8(_mm_max_epu8(bytes, control), control)); /* unsigned <= 0x1f */
        int mask = _mm_movemask_epi8(hits);
        if (mask) return p + __builtin_ctz((unsigned)mask);
        p += 16;
    }
#endif
    while (p < end && *p != '"' && *p != '\\' && *p >= 0x20) p++;
    return p;
}

/* At an opening quote: past the closing one when the string is spelled as msgspec spells it. */
static int scan_string(Scan *s) {
    const unsigned char *p = s->p + 1, *end = s->end;
    while ((p = next_special(p, end)) < end) {
        unsigned char c = *p;
        if (c == '"') {
            s->p = p + 1;
            return 1;
        }
        if (c < 0x20) return 0;
        if (c != '\\') {
            p++;
            continue;
        }
        if (end - p < 2) return 0;
        switch (p[1]) {
        case '"': case '\\': case 'b': case 'f': case 'n': case 'r': case 't':
            p += 2;
            continue;
        case 'u': {
            if (end - p < 6 || p[2] != '0' || p[3] != '0' || (p[4] != '0' && p[4] != '1')) return 0;
            unsigned char low = p[5];
            int digit;
            if (low >= '0' && low <= '9') digit = low - '0';
            else if (low >= 'a' && low <= 'f') digit = low - 'a' + 10;
            else return 0;
            int code = (p[4] - '0') * 16 + digit;
            /* These five have a short escape, which msgspec writes instead. */
            if (code == 0x08 || code == 0x09 || code == 0x0a || code == 0x0c || code == 0x0d) return 0;
            p += 6;
            continue;
        }
        default:
            return 0;
        }
    }
    return 0;
}

static int scan_number(Scan *s) {
    const unsigned char *p = s->p, *end = s->end;
    int negative = *p == '-';
    if (negative) p++;
    const unsigned char *digits = p;
    if (p >= end || *p < '0' || *p > '9') return 0;
    if (*p == '0') p++;
    else
        while (p < end && *p >= '0' && *p <= '9') p++;
    if (p < end && ((*p >= '0' && *p <= '9') || *p == '.' || *p == 'e' || *p == 'E')) return 0;
    Py_ssize_t count = p - digits;
    if (count > MAX_INT_DIGITS || (negative && *digits == '0')) return 0;
    s->p = p;
    return 1;
}

static int scan_literal(Scan *s, const char *word, Py_ssize_t size) {
    if (s->end - s->p < size || memcmp(s->p, word, (size_t)size) != 0) return 0;
    s->p += size;
    return 1;
}

static int scan_object(Scan *s, int depth) {
    s->p++;
    if (s->p < s->end && *s->p == '}') {
        s->p++;
        return 1;
    }
    Py_ssize_t first = s->keys;
    int ok = 0;
    for (;;) {
        if (s->p >= s->end || *s->p != '"') break;
        const unsigned char *key = s->p;
        if (!scan_string(s)) break;
        Py_ssize_t size = s->p - key;
        /* A key spelled canonically has one spelling: equal strings are equal bytes. */
        Py_ssize_t k = first;
        while (k < s->keys && !(s->key_len[k] == size && memcmp(s->key_at[k], key, (size_t)size) == 0)) k++;
        if (k < s->keys || s->keys >= MAX_KEYS || s->keys - first >= MAX_OBJECT_KEYS) break;
        s->key_at[s->keys] = key;
        s->key_len[s->keys] = size;
        s->keys++;
        if (s->p >= s->end || *s->p != ':') break;
        s->p++;
        if (!scan_value(s, depth) || s->p >= s->end) break;
        if (*s->p == ',') {
            s->p++;
            continue;
        }
        if (*s->p == '}') {
            s->p++;
            ok = 1;
        }
        break;
    }
    s->keys = first;
    return ok;
}

static int scan_array(Scan *s, int depth) {
    s->p++;
    if (s->p < s->end && *s->p == ']') {
        s->p++;
        return 1;
    }
    for (;;) {
        if (!scan_value(s, depth) || s->p >= s->end) return 0;
        if (*s->p == ',') {
            s->p++;
            continue;
        }
        if (*s->p != ']') return 0;
        s->p++;
        return 1;
    }
}

static int scan_value(Scan *s, int depth) {
    if (s->p >= s->end) return 0;
    switch (*s->p) {
    case '"': return scan_string(s);
    case '{': return depth < MAX_DEPTH && scan_object(s, depth + 1);
    case '[': return depth < MAX_DEPTH && scan_array(s, depth + 1);
    case 't': return scan_literal(s, "true", 4);
    case 'f': return scan_literal(s, "false", 5);
    case 'n': return scan_literal(s, "null", 4);
    default: return scan_number(s);
    }
}

static int is_canonical(const unsigned char *line, Py_ssize_t size) {
    Scan s;
    s.p = line;
    s.end = line + size;
    s.keys = 0;
    return scan_value(&s, 0) && s.p == s.end;
}

static PyObject *canonical(PyObject *self, PyObject *arg) {
    Py_buffer view;
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0) return NULL;
    int verdict = is_canonical((const unsigned char *)view.buf, view.len);
    PyBuffer_Release(&view);
    return PyBool_FromLong(verdict);
}

static PyObject *line_starts(PyObject *self, PyObject *arg) {
    Py_buffer view;
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0) return NULL;
    const char *data = (const char *)view.buf, *end = data + view.len;
    Py_ssize_t lines = 0;
    for (const char *at = data; at < end && (at = memchr(at, '\n', (size_t)(end - at))) != NULL; at++) lines++;
    PyObject *result = PyBytes_FromStringAndSize(NULL, (lines + 1) * (Py_ssize_t)sizeof(Py_ssize_t));
    if (result != NULL) {
        Py_ssize_t *starts = (Py_ssize_t *)PyBytes_AS_STRING(result);
        Py_ssize_t line = 0;
        starts[line++] = 0;
        for (const char *at = data; line <= lines && (at = memchr(at, '\n', (size_t)(end - at))) != NULL; at++) starts[line++] = at + 1 - data;
    }
    PyBuffer_Release(&view);
    return result;
}

/* One item's bytes in the result: a proven line of the region, or the fallback's bytes object. */
typedef struct {
    const char *data;
    Py_ssize_t size;
    PyObject *owner; /* the fallback's piece (a new reference), or NULL for a region line */
} Piece;

static PyObject *join_lines(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 6) {
        PyErr_SetString(PyExc_TypeError, "join_lines(items, values, base, region, starts, fallback) takes six arguments");
        return NULL;
    }
    PyObject *items = args[0], *values = args[1], *fallback = args[5];
    if (!PyList_Check(items) || !PyList_Check(values)) {
        PyErr_SetString(PyExc_TypeError, "join_lines: items and values must be lists");
        return NULL;
    }
    Py_ssize_t base = PyLong_AsSsize_t(args[2]);
    if (base == -1 && PyErr_Occurred()) return NULL;
    Py_buffer region, starts_view;
    if (PyObject_GetBuffer(args[3], &region, PyBUF_SIMPLE) < 0) return NULL;
    if (PyObject_GetBuffer(args[4], &starts_view, PyBUF_SIMPLE) < 0) {
        PyBuffer_Release(&region);
        return NULL;
    }
    const Py_ssize_t *starts = (const Py_ssize_t *)starts_view.buf;
    Py_ssize_t lines = starts_view.len / (Py_ssize_t)sizeof(Py_ssize_t) - 1;
    const char *data = (const char *)region.buf;
    Py_ssize_t count = PyList_GET_SIZE(items), made = 0, total = 0;
    PyObject *result = NULL;
    Piece *pieces = PyMem_Malloc((size_t)(count ? count : 1) * sizeof(Piece));
    if (pieces == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    /* First every item's bytes (the fallback may run Python code: the items list is re-read each time), then one copy. */
    for (; made < count && made < PyList_GET_SIZE(items); made++) {
        PyObject *item = PyList_GET_ITEM(items, made);
        Py_ssize_t line = base + made;
        Piece *piece = &pieces[made];
        piece->owner = NULL;
        if (base >= 0 && line < lines && line < PyList_GET_SIZE(values) && PyList_GET_ITEM(values, line) == item) {
            Py_ssize_t start = starts[line], stop = starts[line + 1];
            if (0 <= start && start < stop && stop <= region.len && data[stop - 1] == '\n' && is_canonical((const unsigned char *)data + start, stop - start - 1)) {
                piece->data = data + start;
                piece->size = stop - start;
                total += piece->size;
                continue;
            }
        }
        Py_INCREF(item); /* the fallback may drop the list's reference */
        PyObject *bytes = PyObject_CallOneArg(fallback, item);
        Py_DECREF(item);
        if (bytes == NULL) goto done;
        if (!PyBytes_Check(bytes)) {
            Py_DECREF(bytes);
            PyErr_SetString(PyExc_TypeError, "join_lines: the fallback must return bytes");
            goto done;
        }
        piece->owner = bytes;
        piece->data = PyBytes_AS_STRING(bytes);
        piece->size = PyBytes_GET_SIZE(bytes);
        total += piece->size;
    }
    if (made != count) {
        PyErr_SetString(PyExc_RuntimeError, "join_lines: the items changed while they were joined");
        goto done;
    }
    result = PyBytes_FromStringAndSize(NULL, total);
    if (result != NULL) {
        char *out = PyBytes_AS_STRING(result);
        for (Py_ssize_t i = 0; i < made; i++) {
            memcpy(out, pieces[i].data, (size_t)pieces[i].size);
            out += pieces[i].size;
        }
    }
done:
    if (pieces != NULL) {
        for (Py_ssize_t i = 0; i < made; i++) Py_XDECREF(pieces[i].owner);
        PyMem_Free(pieces);
    }
    PyBuffer_Release(&starts_view);
    PyBuffer_Release(&region);
    return result;
}

static PyMethodDef methods[] = {
    {"canonical", canonical, METH_O, "Whether the line is proven to be msgspec's encoding of its own value."},
    {"line_starts", line_starts, METH_O, "Each line's offset in a region, and the region's length (native Py_ssize_t)."},
    {"join_lines", (PyCFunction)(void (*)(void))join_lines, METH_FASTCALL, "The items' raw lines: their own where proven, else the fallback's."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_rawlines", "A log's own bytes as its events' raw lines (optional accelerator).", -1, methods};

PyMODINIT_FUNC PyInit__rawlines(void) { return PyModule_Create(&module); }
