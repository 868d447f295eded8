/*
 * Byte-level scans of the log reader, in C (an optional accelerator).
 *
 * framed_line_count(region) computes exactly what
 * indexer.records._framed_line_count_python computes (a property test holds
 * them equal): for a region that ends with a line feed, its number of lines
 * when every line feed but the last lies between "}" and "{" and the region's
 * last line ends with "}", else 0.  The Python path takes one bytes.find and
 * two index checks per line, a few percent of a worker's CPU on short lines;
 * here it is one memchr per line.
 *
 * frame_end(data, pos, size) is indexer.zstdframes.frame_end_python's
 * structural walk over one Zstandard frame (header, block headers, checksum):
 * the frame's end offset, or -1 when it is torn; -2 for anything the Python
 * walk raises on (a bad magic, reserved bits or block type) or cannot index,
 * so that the caller runs the Python walk for its exact error.  It was one
 * Python step per block of every frame of every log.
 *
 * json_exact(value) says whether msgspec's JSON encoding of ``value``
 * decodes back to an equal value: it holds only dicts with str keys, lists,
 * str without surrogates, 64-bit ints, finite floats, bools and None, at most
 * JSON_EXACT_DEPTH deep (msgspec's decoder stops at 1000).  A split stream's
 * reading stage sends such events as their JSON lines without decoding them
 * back to compare; for anything else it still compares.
 *
 * member_lines(head, texts, first_seq, times) writes a packed chunk row's
 * member lines as indexer.packedrows.PackedRow.encode's Python path does:
 * for each member, '{"type":"assistant/chunk","seq":' seq ',"time":' time,
 * then ``head`` (the row's shared '"data":{…,"text":' part), its fragment's
 * JSON string (the LF-terminated lines of ``texts``) and '}}}' LF.  None when
 * the inputs are not that (a count mismatch, a time not a 64-bit exact int).
 *
 * cut_blocks(data, max_lines, max_bytes) is indexer.blockcuts.cut_blocks_python:
 * where raw blocks end in LF-terminated lines (one memchr per line instead of
 * a bytes object per line).
 *
 * lines_at(data, positions) is b"".join of the LF-terminated lines of ``data`` at
 * ``positions`` (ascending line indexes), each with its LF: only those lines
 * are copied (a split stream's full events, out of their batch's lines).
 * None when a position is not an int, not ascending or past the last line.
 *
 * batch_columns(items, packed_type, chunk_type, full_types) is the column part of
 * the op indexer.splitstream._column_op_python makes of a reading stage's batch
 * (dicts, and rows of exactly ``packed_type`` standing for ``len(row.times)``
 * members of type ``chunk_type``): (first seq, types, times, full_at,
 * full events, whether a packed row was met), where full_at are the positions
 * (in the expanded batch) of the dicts with a "sourceEventSeqs" key or a type
 * that is not a str or is in ``full_types``.  None when the batch is anything
 * else (empty, another item type, a missing "seq" or "type", a seq that is not
 * an exact 64-bit int continuing the previous one, a row's times not a list):
 * the Python path then decides.  It was a few Python steps per event of every
 * batch on a long log's critical path.  The types of events not sent in full
 * are shared str objects (one per distinct type), equal to the events' own.
 *
 * Without the extension the Python paths are used and the answers are the same.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>
#include <limits.h>
#include <string.h>

#define JSON_EXACT_DEPTH 500

static PyObject *framed_line_count(PyObject *self, PyObject *arg) {
    Py_buffer view;
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0) return NULL;
    const char *data = (const char *)view.buf;
    Py_ssize_t last = view.len - 1;
    Py_ssize_t count = 0;
    if (last >= 1 && data[last - 1] == '}') {
        const char *at = memchr(data, '\n', (size_t)view.len);
        count = 1;
        while (at != NULL && at != data + last) {
            /* A line feed at offset 0 has the region's last byte before it (Python's region[-1]). */
            char before = at == data ? data[last] : at[-1];
            if (before != '}' || at[1] != '{') {
                count = 0;
                break;
            }
            count++;
            at = memchr(at + 1, '\n', (size_t)(data + last - at));
        }
        if (at == NULL) count = 0; /* no final line feed: not a region this check is for */
    }
    PyBuffer_Release(&view);
    return PyLong_FromSsize_t(count);
}

static Py_ssize_t walk_frame(const unsigned char *d, Py_ssize_t pos, Py_ssize_t size) {
    static const Py_ssize_t dict_id_bytes[4] = {0, 1, 2, 4};
    if (size - pos < 4) return -1;
    if (memcmp(d + pos, "\x28\xb5\x2f\xfd", 4) != 0) return -2;
    if (size - pos < 5) return -1;
    unsigned descriptor = d[pos + 4];
    if (descriptor & 0x18) return -2;
    unsigned fcs_flag = descriptor >> 6;
    unsigned single_segment = (descriptor >> 5) & 1;
    Py_ssize_t fcs_bytes = fcs_flag == 0 ? (Py_ssize_t)single_segment : (fcs_flag == 1 ? 2 : fcs_flag == 2 ? 4 : 8);
    pos += 5 + (single_segment ? 0 : 1) + dict_id_bytes[descriptor & 3] + fcs_bytes;
    if (pos > size) return -1;
    for (;;) {
        if (size - pos < 3) return -1;
        uint32_t block = (uint32_t)d[pos] | ((uint32_t)d[pos + 1] << 8) | ((uint32_t)d[pos + 2] << 16);
        unsigned block_type = (block >> 1) & 3;
        if (block_type == 3) return -2;
        pos += block_type == 1 ? 4 : 3 + (Py_ssize_t)(block >> 3);
        if (pos > size) return -1;
        if (block & 1) break;
    }
    if (descriptor & 4) { /* content checksum */
        pos += 4;
        if (pos > size) return -1;
    }
    return pos;
}

/* The arguments (bytes-like, int, int) of a fast call: the buffer is held on success
   (release it); on failure an exception is set and nothing is held. */
static int buffer_and_two_sizes(PyObject *const *args, Py_ssize_t nargs, const char *signature, Py_buffer *view, Py_ssize_t *first, Py_ssize_t *second) {
    if (nargs != 3) {
        PyErr_Format(PyExc_TypeError, "%s takes three arguments", signature);
        return -1;
    }
    *first = PyLong_AsSsize_t(args[1]);
    if (*first == -1 && PyErr_Occurred()) return -1;
    *second = PyLong_AsSsize_t(args[2]);
    if (*second == -1 && PyErr_Occurred()) return -1;
    return PyObject_GetBuffer(args[0], view, PyBUF_SIMPLE);
}

static PyObject *frame_end(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    Py_buffer view;
    Py_ssize_t pos, size;
    if (buffer_and_two_sizes(args, nargs, "frame_end(data, pos, size)", &view, &pos, &size) < 0) return NULL;
    /* Outside the contract (len(data) == size, 0 <= pos): the Python walk decides. */
    Py_ssize_t end = pos < 0 || size > view.len ? -2 : walk_frame((const unsigned char *)view.buf, pos, size);
    PyBuffer_Release(&view);
    return PyLong_FromSsize_t(end);
}

static int has_surrogate(PyObject *text) {
    if (PyUnicode_READY(text) < 0) return -1;
    int kind = PyUnicode_KIND(text);
    if (kind == PyUnicode_1BYTE_KIND) return 0;
    const void *data = PyUnicode_DATA(text);
    Py_ssize_t length = PyUnicode_GET_LENGTH(text);
    for (Py_ssize_t at = 0; at < length; at++) {
        Py_UCS4 unit = PyUnicode_READ(kind, data, at);
        if (unit >= 0xD800 && unit <= 0xDFFF) return 1;
    }
    return 0;
}

/* 1: encodes to JSON that decodes back equal; 0: not known to; -1: an error is set. */
static int exact(PyObject *value, int depth) {
    PyTypeObject *type = Py_TYPE(value);
    if (type == &PyUnicode_Type) {
        int surrogate = has_surrogate(value);
        return surrogate < 0 ? -1 : !surrogate;
    }
    if (type == &PyBool_Type || value == Py_None) return 1;
    if (type == &PyLong_Type) {
        /* Past 64 bits only the comparison decides (digit limits of int conversions). */
        int overflow;
        long long number = PyLong_AsLongLongAndOverflow(value, &overflow);
        if (number == -1 && PyErr_Occurred()) return -1;
        return overflow ? 0 : 1;
    }
    if (type == &PyFloat_Type) return isfinite(PyFloat_AS_DOUBLE(value)) ? 1 : 0;
    if (depth >= JSON_EXACT_DEPTH) return 0;
    if (type == &PyList_Type) {
        for (Py_ssize_t at = 0; at < PyList_GET_SIZE(value); at++) {
            int ok = exact(PyList_GET_ITEM(value, at), depth + 1);
            if (ok != 1) return ok;
        }
        return 1;
    }
    if (type == &PyDict_Type) {
        Py_ssize_t position = 0;
        PyObject *key, *item;
        while (PyDict_Next(value, &position, &key, &item)) {
            if (Py_TYPE(key) != &PyUnicode_Type) return 0;
            int ok = exact(key, depth + 1);
            if (ok == 1) ok = exact(item, depth + 1);
            if (ok != 1) return ok;
        }
        return 1;
    }
    return 0;
}

static PyObject *json_exact(PyObject *self, PyObject *value) {
    int ok = exact(value, 0);
    if (ok < 0) return NULL;
    return PyBool_FromLong(ok);
}

#define MEMBER_START "{\"type\":\"assistant/chunk\",\"seq\":"
#define MEMBER_TIME ",\"time\":"
#define MEMBER_END "}}}\n"

static int decimal(int64_t value, char *out) {
    char digits[24];
    int length = 0;
    uint64_t magnitude = value < 0 ? (uint64_t)0 - (uint64_t)value : (uint64_t)value;
    do {
        digits[length++] = (char)('0' + magnitude % 10);
        magnitude /= 10;
    } while (magnitude);
    int written = 0;
    if (value < 0) out[written++] = '-';
    while (length) out[written++] = digits[--length];
    return written;
}

static PyObject *member_lines(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 4 || !PyBytes_CheckExact(args[0]) || !PyBytes_CheckExact(args[1]) || !PyList_CheckExact(args[3])) Py_RETURN_NONE;
    const char *head = PyBytes_AS_STRING(args[0]);
    Py_ssize_t head_size = PyBytes_GET_SIZE(args[0]);
    const char *texts = PyBytes_AS_STRING(args[1]);
    Py_ssize_t texts_size = PyBytes_GET_SIZE(args[1]);
    PyObject *times = args[3];
    Py_ssize_t count = PyList_GET_SIZE(times);
    int overflow;
    long long first = PyLong_CheckExact(args[2]) ? PyLong_AsLongLongAndOverflow(args[2], &overflow) : (overflow = 1, 0);
    if (overflow || (first == -1 && PyErr_Occurred()) || first < 0 || first > INT64_MAX - count) {
        PyErr_Clear();
        Py_RETURN_NONE;
    }
    if (count == 0 || texts_size == 0 || texts[texts_size - 1] != '\n') Py_RETURN_NONE;
    /* Room for every member with 20-digit numbers; the bytes are cut to size at the end. */
    Py_ssize_t fixed = (Py_ssize_t)(sizeof(MEMBER_START) - 1 + sizeof(MEMBER_TIME) - 1 + sizeof(MEMBER_END) - 1) + head_size + 40;
    if (count > (PY_SSIZE_T_MAX - texts_size) / fixed) Py_RETURN_NONE;
    PyObject *result = PyBytes_FromStringAndSize(NULL, count * fixed + texts_size);
    if (result == NULL) return NULL;
    char *out = PyBytes_AS_STRING(result);
    const char *text = texts, *texts_end = texts + texts_size;
    for (Py_ssize_t at = 0; at < count; at++) {
        PyObject *item = PyList_GET_ITEM(times, at);
        long long time = PyLong_CheckExact(item) ? PyLong_AsLongLongAndOverflow(item, &overflow) : (overflow = 1, 0);
        const char *text_end = text < texts_end ? memchr(text, '\n', (size_t)(texts_end - text)) : NULL;
        if (overflow || (time == -1 && PyErr_Occurred()) || text_end == NULL) {
            PyErr_Clear();
            Py_DECREF(result);
            Py_RETURN_NONE;
        }
        memcpy(out, MEMBER_START, sizeof(MEMBER_START) - 1);
        out += sizeof(MEMBER_START) - 1;
        out += decimal((int64_t)first + at, out);
        memcpy(out, MEMBER_TIME, sizeof(MEMBER_TIME) - 1);
        out += sizeof(MEMBER_TIME) - 1;
        out += decimal((int64_t)time, out);
        memcpy(out, head, (size_t)head_size);
        out += head_size;
        memcpy(out, text, (size_t)(text_end - text));
        out += text_end - text;
        memcpy(out, MEMBER_END, sizeof(MEMBER_END) - 1);
        out += sizeof(MEMBER_END) - 1;
        text = text_end + 1;
    }
    if (text != texts_end) { /* more fragments than times */
        Py_DECREF(result);
        Py_RETURN_NONE;
    }
    if (_PyBytes_Resize(&result, out - PyBytes_AS_STRING(result)) < 0) return NULL;
    return result;
}

static PyObject *cut_blocks(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    Py_buffer view;
    Py_ssize_t max_lines, max_bytes;
    if (buffer_and_two_sizes(args, nargs, "cut_blocks(data, max_lines, max_bytes)", &view, &max_lines, &max_bytes) < 0) return NULL;
    PyObject *cuts = PyList_New(0);
    if (cuts == NULL) {
        PyBuffer_Release(&view);
        return NULL;
    }
    const char *data = (const char *)view.buf;
    Py_ssize_t start = 0, position = 0, count = 0, size = 0;
    const char *at;
    while (position < view.len && (at = memchr(data + position, '\n', (size_t)(view.len - position))) != NULL) {
        Py_ssize_t end = at - data;
        size += end - position;
        count++;
        position = end + 1;
        if (count >= max_lines || size >= max_bytes) {
            PyObject *cut = Py_BuildValue("(nnn)", start, end, count);
            if (cut == NULL || PyList_Append(cuts, cut) < 0) {
                Py_XDECREF(cut);
                Py_DECREF(cuts);
                PyBuffer_Release(&view);
                return NULL;
            }
            Py_DECREF(cut);
            start = position;
            count = size = 0;
        }
    }
    PyBuffer_Release(&view);
    PyObject *result = Py_BuildValue("(Nnnn)", cuts, start, count, size);
    return result;
}

static PyObject *lines_at(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2 || !PyBytes_CheckExact(args[0]) || !PyList_CheckExact(args[1])) Py_RETURN_NONE;
    const char *data = PyBytes_AS_STRING(args[0]);
    Py_ssize_t size = PyBytes_GET_SIZE(args[0]);
    PyObject *positions = args[1];
    Py_ssize_t wanted = PyList_GET_SIZE(positions);
    PyObject *result = PyBytes_FromStringAndSize(NULL, size);
    if (result == NULL) return NULL;
    char *out = PyBytes_AS_STRING(result);
    Py_ssize_t line = 0, offset = 0, previous = -1;
    for (Py_ssize_t at = 0; at < wanted; at++) {
        PyObject *item = PyList_GET_ITEM(positions, at);
        Py_ssize_t target = PyLong_CheckExact(item) ? PyLong_AsSsize_t(item) : -1;
        if (target <= previous) { /* not an int, negative, or not ascending */
            PyErr_Clear();
            Py_DECREF(result);
            Py_RETURN_NONE;
        }
        previous = target;
        const char *end = NULL;
        for (;;) {
            end = offset < size ? memchr(data + offset, '\n', (size_t)(size - offset)) : NULL;
            if (end == NULL || line == target) break;
            offset = end - data + 1;
            line++;
        }
        if (end == NULL) { /* past the last line */
            Py_DECREF(result);
            Py_RETURN_NONE;
        }
        Py_ssize_t length = end - data + 1 - offset;
        memcpy(out, data + offset, (size_t)length);
        out += length;
        offset += length;
        line++;
    }
    if (_PyBytes_Resize(&result, out - PyBytes_AS_STRING(result)) < 0) return NULL;
    return result;
}

/* The seq of a batch item as a 64-bit int: 0 and *ok = 1, or *ok = 0 when it is not an exact int that fits. */
static long long exact_seq(PyObject *seq, int *ok) {
    int overflow = 0;
    long long value = seq != NULL && PyLong_CheckExact(seq) ? PyLong_AsLongLongAndOverflow(seq, &overflow) : (overflow = 1, 0);
    if (overflow || (value == -1 && PyErr_Occurred())) {
        PyErr_Clear();
        *ok = 0;
        return 0;
    }
    *ok = 1;
    return value;
}

/* Append ``count`` references to ``item`` to ``list``; -1 with an exception set on failure. */
static int append_repeated(PyObject *list, PyObject *item, Py_ssize_t count) {
    for (Py_ssize_t at = 0; at < count; at++)
        if (PyList_Append(list, item) < 0) return -1;
    return 0;
}

/* The keys batch_columns reads, interned once. */
static PyObject *key_seq, *key_type, *key_time, *key_sources;

static int intern_keys(void) {
    if (key_sources != NULL) return 0;
    key_seq = PyUnicode_InternFromString("seq");
    key_type = PyUnicode_InternFromString("type");
    key_time = PyUnicode_InternFromString("time");
    key_sources = PyUnicode_InternFromString("sourceEventSeqs");
    return key_seq && key_type && key_time && key_sources ? 0 : -1;
}

/* One str object per distinct event type (at most TYPES_SHARED of them): a batch's types list
   then holds shared objects, which pickle once per message (the pickler's memo) and unpickle
   as one object each, rather than one string per event. */
#define TYPES_SHARED 256
static PyObject *shared_types;

static PyObject *shared_type(PyObject *etype) {
    if (shared_types == NULL && (shared_types = PyDict_New()) == NULL) return NULL;
    PyObject *known = PyDict_GetItemWithError(shared_types, etype);
    if (known != NULL) return known;
    if (PyErr_Occurred()) return NULL;
    if (PyDict_GET_SIZE(shared_types) < TYPES_SHARED && PyDict_SetItem(shared_types, etype, etype) < 0) return NULL;
    return etype;
}

/* 1: the dict's event is sent in full; 0: only its type, seq and time; -1: an exception is set. */
static int sent_in_full(PyObject *event, PyObject *etype, PyObject *full_types) {
    int has = PyDict_Contains(event, key_sources);
    if (has != 0) return has;
    if (!PyUnicode_CheckExact(etype)) return 1;
    return PySet_Contains(full_types, etype);
}

static PyObject *batch_columns(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 4 || !PyList_CheckExact(args[0]) || !PyType_Check(args[1]) || !PyAnySet_Check(args[3])) Py_RETURN_NONE;
    PyObject *items = args[0], *chunk_type = args[2], *full_types = args[3];
    PyTypeObject *packed_type = (PyTypeObject *)args[1];
    Py_ssize_t count = PyList_GET_SIZE(items);
    if (count == 0) Py_RETURN_NONE;
    if (intern_keys() < 0) return NULL;
    PyObject *types = PyList_New(0), *times = PyList_New(0), *full_at = PyList_New(0), *full = PyList_New(0);
    PyObject *first = NULL;
    int packed = 0, ok = 1;
    long long expected = 0;
    if (types == NULL || times == NULL || full_at == NULL || full == NULL) goto error;
    for (Py_ssize_t at = 0; at < count && ok; at++) {
        PyObject *item = PyList_GET_ITEM(items, at);
        PyObject *seq;
        Py_ssize_t members = 1;
        if (Py_TYPE(item) == packed_type) {
            seq = PyObject_GetAttrString(item, "first_seq");
            PyObject *row_times = seq == NULL ? NULL : PyObject_GetAttrString(item, "times");
            if (row_times == NULL || !PyList_CheckExact(row_times)) {
                PyErr_Clear();
                Py_XDECREF(seq);
                Py_XDECREF(row_times);
                ok = 0;
                break;
            }
            members = PyList_GET_SIZE(row_times);
            packed = 1;
            int failed = append_repeated(types, chunk_type, members) < 0 || PyList_SetSlice(times, PY_SSIZE_T_MAX, PY_SSIZE_T_MAX, row_times) < 0;
            Py_DECREF(row_times);
            if (failed) {
                Py_DECREF(seq);
                goto error;
            }
        } else if (PyDict_CheckExact(item)) {
            seq = PyDict_GetItemWithError(item, key_seq);
            PyObject *etype = seq == NULL ? NULL : PyDict_GetItemWithError(item, key_type);
            PyObject *time = etype == NULL ? NULL : PyDict_GetItemWithError(item, key_time);
            if (PyErr_Occurred()) goto error;
            if (seq == NULL || etype == NULL) {
                ok = 0;
                break;
            }
            Py_INCREF(seq);
            int whole = sent_in_full(item, etype, full_types);
            PyObject *column_type = whole == 0 ? shared_type(etype) : etype; /* whole == 0: an exact str */
            if (whole < 0 || column_type == NULL || PyList_Append(types, column_type) < 0 || PyList_Append(times, time != NULL ? time : Py_None) < 0) {
                Py_DECREF(seq);
                goto error;
            }
            if (whole) {
                PyObject *position = PyLong_FromSsize_t(PyList_GET_SIZE(types) - 1);
                int failed = position == NULL || PyList_Append(full_at, position) < 0 || PyList_Append(full, item) < 0;
                Py_XDECREF(position);
                if (failed) {
                    Py_DECREF(seq);
                    goto error;
                }
            }
        } else {
            ok = 0;
            break;
        }
        long long value = exact_seq(seq, &ok);
        if (ok && at == 0) {
            first = seq;
            Py_INCREF(first);
            expected = value;
        }
        Py_DECREF(seq);
        ok = ok && value == expected && value <= LLONG_MAX - members;
        expected = value + members;
    }
    if (!ok) {
        Py_DECREF(types);
        Py_DECREF(times);
        Py_DECREF(full_at);
        Py_DECREF(full);
        Py_XDECREF(first);
        Py_RETURN_NONE;
    }
    return Py_BuildValue("(NNNNNO)", first, types, times, full_at, full, packed ? Py_True : Py_False);
error:
    Py_XDECREF(types);
    Py_XDECREF(times);
    Py_XDECREF(full_at);
    Py_XDECREF(full);
    Py_XDECREF(first);
    return NULL;
}

/* check_row: a packed chunk row's (seq0, member times) in its common spelling; None otherwise.

   The spelling taken: the envelope exactly {type, seq0, time0, data}; seq0 an exact int in
   [0, 2^53 - 1] and time0 one in the safe range; data an exact dict with exactly the keys of
   the row's tag (tool-call-chunks: turn, step, index, id, dt, args and maybe name, id and
   name exact strs; the others: turn, step, index, dt, texts); turn, step and index exact ints
   or floats; the fragments a non-empty list of exact strs; dt a list of exact ints, one fewer
   than the fragments, every gap and every running sum safe, and so the last member's seq.
   Anything else (a float time, a bool, a missing key, an unsafe sum) is None and the Python
   check decides, raising or not: this one never answers differently, it only answers less. */
#define MAX_SAFE 9007199254740991LL
static PyObject *row_keys[12];
enum { RK_TYPE, RK_SEQ0, RK_TIME0, RK_DATA, RK_TURN, RK_STEP, RK_INDEX, RK_DT, RK_TEXTS, RK_ID, RK_ARGS, RK_NAME };

/* Intern ``count`` key names into ``keys`` once (the last one set means all are); -1 on failure. */
static int intern_names(PyObject **keys, const char *const *names, int count) {
    if (keys[count - 1] != NULL) return 0;
    for (int at = 0; at < count; at++)
        if ((keys[at] = PyUnicode_InternFromString(names[at])) == NULL) return -1;
    return 0;
}

/* The dict's item for an interned key, or NULL (absent; an error is cleared: the caller answers None). */
static PyObject *item_for(PyObject *dict, PyObject *key) {
    PyObject *value = PyDict_GetItemWithError(dict, key);
    if (value == NULL) PyErr_Clear();
    return value;
}

static int intern_row_keys(void) {
    static const char *const names[12] = {"type", "seq0", "time0", "data", "turn", "step", "index", "dt", "texts", "id", "args", "name"};
    return intern_names(row_keys, names, 12);
}

static PyObject *item_of(PyObject *dict, int key) { return item_for(dict, row_keys[key]); }

/* An exact int within [low, MAX_SAFE] as a 64-bit value: 1, or 0 when it is not one. */
static int safe_int(PyObject *value, long long low, long long *out) {
    int overflow = 0;
    if (value == NULL || !PyLong_CheckExact(value)) return 0;
    long long number = PyLong_AsLongLongAndOverflow(value, &overflow);
    if (overflow || (number == -1 && PyErr_Occurred())) {
        PyErr_Clear();
        return 0;
    }
    if (number < low || number > MAX_SAFE) return 0;
    *out = number;
    return 1;
}

static int is_number(PyObject *value) { return value != NULL && (PyLong_CheckExact(value) || PyFloat_CheckExact(value)); }

static PyObject *checked_row(PyObject *row) {
    long long seq0, now, gap;
    if (!PyDict_CheckExact(row) || PyDict_GET_SIZE(row) != 4 || intern_row_keys() < 0) {
        PyErr_Clear();
        Py_RETURN_NONE;
    }
    PyObject *tag = item_of(row, RK_TYPE), *first = item_of(row, RK_SEQ0), *data = item_of(row, RK_DATA);
    if (tag == NULL || !PyUnicode_CheckExact(tag) || !safe_int(first, 0, &seq0) || !safe_int(item_of(row, RK_TIME0), -MAX_SAFE, &now))
        Py_RETURN_NONE;
    if (data == NULL || !PyDict_CheckExact(data)) Py_RETURN_NONE;
    Py_ssize_t keys = PyDict_GET_SIZE(data);
    PyObject *fragments;
    if (PyUnicode_CompareWithASCIIString(tag, "tool-call-chunks") == 0) {
        PyObject *id = item_of(data, RK_ID), *name = item_of(data, RK_NAME);
        if (id == NULL || !PyUnicode_CheckExact(id) || keys != (name == NULL ? 6 : 7)) Py_RETURN_NONE;
        if (name != NULL && !PyUnicode_CheckExact(name)) Py_RETURN_NONE;
        fragments = item_of(data, RK_ARGS);
    } else {
        if (keys != 5) Py_RETURN_NONE;
        fragments = item_of(data, RK_TEXTS);
    }
    PyObject *gaps = item_of(data, RK_DT);
    if (!is_number(item_of(data, RK_TURN)) || !is_number(item_of(data, RK_STEP)) || !is_number(item_of(data, RK_INDEX))) Py_RETURN_NONE;
    if (fragments == NULL || !PyList_CheckExact(fragments) || gaps == NULL || !PyList_CheckExact(gaps)) Py_RETURN_NONE;
    Py_ssize_t count = PyList_GET_SIZE(fragments);
    if (count == 0 || PyList_GET_SIZE(gaps) != count - 1 || seq0 + count - 1 > MAX_SAFE) Py_RETURN_NONE;
    for (Py_ssize_t at = 0; at < count; at++)
        if (!PyUnicode_CheckExact(PyList_GET_ITEM(fragments, at))) Py_RETURN_NONE;
    PyObject *times = PyList_New(count);
    if (times == NULL) return NULL;
    PyObject *time0 = item_of(row, RK_TIME0);
    Py_INCREF(time0);
    PyList_SET_ITEM(times, 0, time0);
    for (Py_ssize_t at = 1; at < count; at++) {
        /* |gap|, |now| <= 2^53 - 1: the sum cannot overflow 64 bits. */
        if (!safe_int(PyList_GET_ITEM(gaps, at - 1), -MAX_SAFE, &gap) || (now += gap) < -MAX_SAFE || now > MAX_SAFE) {
            Py_DECREF(times);
            Py_RETURN_NONE;
        }
        PyObject *member = PyLong_FromLongLong(now);
        if (member == NULL) {
            Py_DECREF(times);
            return NULL;
        }
        PyList_SET_ITEM(times, at, member);
    }
    PyObject *result = PyTuple_Pack(2, first, times);
    Py_DECREF(times);
    return result;
}

static PyObject *check_row(PyObject *self, PyObject *row) { return checked_row(row); }

/* plain_run: the fast path's plain lines from ``start``, in C (Pipeline.consume_region's loop).

   Takes values while each is (a) a packed row that check_row takes (its common spelling)
   whose first seq is the expected one, when the sink takes packed rows (``packed_row`` is the
   PackedRow type; None: a row ends the run), appended as PackedRow(value, seq0, times); or
   (b) a dict of exactly four keys, data among them, an exact-int seq equal to the expected
   one, an exact-int time in the safe range and a type of the inert or the walked kind (for
   the walked, ``walk_steps[type](closers, value)`` is called first), appended as it is.  Stops
   at the first value it does not take; the Python loop then handles that one by its own rules
   (a value taken here is one that loop would take the same way).  Returns (stop, expected). */
static PyObject *plain_run(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 11 || !PyList_CheckExact(args[0]) || !PyDict_CheckExact(args[3]) || !PyDict_CheckExact(args[7]) || !PyList_CheckExact(args[10])) {
        PyErr_SetString(PyExc_TypeError, "plain_run(values, start, expected, kinds, inert, walked, row, walk_steps, closers, packed_row, out)");
        return NULL;
    }
    PyObject *values = args[0], *kinds = args[3], *inert = args[4], *walked = args[5], *row_kind = args[6];
    PyObject *walk_steps = args[7], *closers = args[8], *packed_row = args[9] == Py_None ? NULL : args[9], *out = args[10];
    Py_ssize_t at = PyLong_AsSsize_t(args[1]);
    long long expected, seq, time;
    if ((at == -1 && PyErr_Occurred()) || intern_keys() < 0 || intern_row_keys() < 0) return NULL;
    if (!safe_int(args[2], 0, &expected)) return Py_BuildValue("(nO)", at, args[2]);  /* the Python loop's case */
    Py_ssize_t size = PyList_GET_SIZE(values);
    for (; at < size; at++) {
        PyObject *value = PyList_GET_ITEM(values, at);
        if (!PyDict_CheckExact(value)) break;
        PyObject *etype = PyDict_GetItemWithError(value, key_type);
        if (etype == NULL || !PyUnicode_CheckExact(etype)) break;
        PyObject *kind = PyDict_GetItemWithError(kinds, etype);
        if (kind == NULL) break;
        if (kind == row_kind) {
            if (packed_row == NULL) break;
            PyObject *checked = checked_row(value);
            if (checked == NULL) return NULL;
            if (checked == Py_None || !safe_int(PyTuple_GET_ITEM(checked, 0), 0, &seq) || seq != expected) {
                Py_DECREF(checked);
                break;
            }
            PyObject *times = PyTuple_GET_ITEM(checked, 1);
            PyObject *item = PyObject_CallFunctionObjArgs(packed_row, value, PyTuple_GET_ITEM(checked, 0), times, NULL);
            expected += PyList_GET_SIZE(times);
            Py_DECREF(checked);
            if (item == NULL) return NULL;
            int failed = PyList_Append(out, item);
            Py_DECREF(item);
            if (failed < 0) return NULL;
            continue;
        }
        if (kind != inert && kind != walked) break;
        if (PyDict_GET_SIZE(value) != 4 || !safe_int(PyDict_GetItemWithError(value, key_seq), 0, &seq) || seq != expected) break;
        if (!safe_int(PyDict_GetItemWithError(value, key_time), -MAX_SAFE, &time) || PyDict_GetItemWithError(value, row_keys[RK_DATA]) == NULL) break;
        if (kind == walked) {
            PyObject *step = PyDict_GetItemWithError(walk_steps, etype);
            if (step == NULL) break;
            PyObject *done = PyObject_CallFunctionObjArgs(step, closers, value, NULL);
            if (done == NULL) return NULL;
            Py_DECREF(done);
        }
        if (PyList_Append(out, value) < 0) return NULL;
        expected++;
    }
    if (PyErr_Occurred()) return NULL;
    return Py_BuildValue("(nL)", at, expected);
}

/* appendable: True when a surface event passes every check of the reader's appended-surface
   fast path (Pipeline._appended_surface: the envelope of an append, then check_message_shape);
   None when it is not known here, and the Python checks decide (they refuse, or accept a
   spelling this one does not take).  What True needs: surfaceOp the str "append"; an exact-int
   time in the safe range and an exact-int seq in [0, 2^53 - 1]; data present and no key
   beyond type, seq, time, data, surfaceOp and sourceEventSeqs; the type a surface type and its
   message (data itself for user/message, else data's message) an exact dict with a non-empty
   str id, the role the type asks for, a source dict with a non-empty str kind and a content
   list; an assistant's source the model kind with non-empty str provider and model; a tool
   result's source the tool kind with a non-empty str callId, and its content one tool-result
   block (a dict of that type with a content list) whose toolCallId is that callId. */
static PyObject *surface_keys[14];
enum { SK_SURFACE_OP, SK_SOURCES, SK_MESSAGE, SK_ID, SK_ROLE, SK_SOURCE, SK_KIND, SK_CONTENT, SK_PROVIDER, SK_MODEL, SK_CALL_ID, SK_TOOL_CALL_ID, SK_DATA, SK_TYPE };

static int intern_surface_keys(void) {
    static const char *const names[14] = {"surfaceOp", "sourceEventSeqs", "message", "id", "role", "source", "kind", "content", "provider", "model", "callId", "toolCallId", "data", "type"};
    return intern_names(surface_keys, names, 14);
}

static PyObject *surface_item(PyObject *dict, int key) { return item_for(dict, surface_keys[key]); }

static int is_str(PyObject *value, const char *text) { return value != NULL && PyUnicode_CheckExact(value) && PyUnicode_CompareWithASCIIString(value, text) == 0; }

static int non_empty_str(PyObject *value) { return value != NULL && PyUnicode_CheckExact(value) && PyUnicode_GET_LENGTH(value) > 0; }

static PyObject *appendable(PyObject *self, PyObject *event) {
    long long number;
    if (!PyDict_CheckExact(event) || intern_keys() < 0 || intern_surface_keys() < 0) {
        PyErr_Clear();
        Py_RETURN_NONE;
    }
    if (!is_str(surface_item(event, SK_SURFACE_OP), "append")) Py_RETURN_NONE;
    if (!safe_int(PyDict_GetItemWithError(event, key_time), -MAX_SAFE, &number) || !safe_int(PyDict_GetItemWithError(event, key_seq), 0, &number)) {
        PyErr_Clear();
        Py_RETURN_NONE;
    }
    PyObject *data = surface_item(event, SK_DATA), *etype = surface_item(event, SK_TYPE);
    if (data == NULL || etype == NULL || !PyUnicode_CheckExact(etype)) Py_RETURN_NONE;
    /* type, seq, time, data and surfaceOp are present: at most sourceEventSeqs besides. */
    Py_ssize_t keys = PyDict_GET_SIZE(event);
    if (keys != 5 && !(keys == 6 && surface_item(event, SK_SOURCES) != NULL)) Py_RETURN_NONE;
    const char *role;
    int kind_of;  /* 0 user/message, 1 assistant/message, 2 tool/result */
    if (PyUnicode_CompareWithASCIIString(etype, "user/message") == 0) kind_of = 0, role = "user";
    else if (PyUnicode_CompareWithASCIIString(etype, "assistant/message") == 0) kind_of = 1, role = "assistant";
    else if (PyUnicode_CompareWithASCIIString(etype, "tool/result") == 0) kind_of = 2, role = "user";
    else Py_RETURN_NONE;
    PyObject *message = data;
    if (kind_of != 0) {
        if (!PyDict_CheckExact(data)) Py_RETURN_NONE;
        message = surface_item(data, SK_MESSAGE);
    }
    if (message == NULL || !PyDict_CheckExact(message)) Py_RETURN_NONE;
    if (!non_empty_str(surface_item(message, SK_ID)) || !is_str(surface_item(message, SK_ROLE), role)) Py_RETURN_NONE;
    PyObject *source = surface_item(message, SK_SOURCE), *content = surface_item(message, SK_CONTENT);
    if (source == NULL || !PyDict_CheckExact(source) || content == NULL || !PyList_CheckExact(content)) Py_RETURN_NONE;
    PyObject *kind = surface_item(source, SK_KIND);
    if (!non_empty_str(kind)) Py_RETURN_NONE;
    if (kind_of == 1) {
        if (!is_str(kind, "model") || !non_empty_str(surface_item(source, SK_PROVIDER)) || !non_empty_str(surface_item(source, SK_MODEL))) Py_RETURN_NONE;
    } else if (kind_of == 2) {
        PyObject *call_id = surface_item(source, SK_CALL_ID);
        if (!is_str(kind, "tool") || !non_empty_str(call_id) || PyList_GET_SIZE(content) != 1) Py_RETURN_NONE;
        PyObject *block = PyList_GET_ITEM(content, 0);
        if (!PyDict_CheckExact(block) || !is_str(surface_item(block, SK_TYPE), "tool-result")) Py_RETURN_NONE;
        PyObject *inner = surface_item(block, SK_CONTENT), *answers = surface_item(block, SK_TOOL_CALL_ID);
        if (inner == NULL || !PyList_CheckExact(inner) || answers == NULL || !PyUnicode_CheckExact(answers)) Py_RETURN_NONE;
        int same = PyUnicode_Compare(answers, call_id);
        if (same == -1 && PyErr_Occurred()) {
            PyErr_Clear();
            Py_RETURN_NONE;
        }
        if (same != 0) Py_RETURN_NONE;
    }
    Py_RETURN_TRUE;
}

static PyMethodDef methods[] = {
    {"batch_columns", (PyCFunction)(void (*)(void))batch_columns, METH_FASTCALL, "A split stream batch's columns (None: take the Python path)."},
    {"lines_at", (PyCFunction)(void (*)(void))lines_at, METH_FASTCALL, "The LF-terminated lines at ascending positions, joined (None: take the Python path)."},
    {"cut_blocks", (PyCFunction)(void (*)(void))cut_blocks, METH_FASTCALL, "Where raw blocks end: (cuts, open start, open lines, open bytes)."},
    {"member_lines", (PyCFunction)(void (*)(void))member_lines, METH_FASTCALL, "A packed row's member lines (None: take the Python path)."},
    {"appendable", appendable, METH_O, "True when a surface event passes the appended-surface fast path's checks (None: the Python checks decide)."},
    {"plain_run", (PyCFunction)(void (*)(void))plain_run, METH_FASTCALL, "The fast path's plain lines from start, in C: (stop, expected)."},
    {"check_row", check_row, METH_O, "A packed row's (seq0, member times) in its common spelling (None: take the Python check)."},
    {"json_exact", json_exact, METH_O, "Whether msgspec's JSON of the value decodes back to an equal value (False: not known)."},
    {"framed_line_count", framed_line_count, METH_O, "A region's line count when every line is one framed object, else 0."},
    {"frame_end", (PyCFunction)(void (*)(void))frame_end, METH_FASTCALL, "The end of the Zstandard frame at pos, -1 when torn, -2: ask the Python walk."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_linescan", "Byte-level scans of the log reader (optional accelerator).", -1, methods};

PyMODINIT_FUNC PyInit__linescan(void) { return PyModule_Create(&module); }
