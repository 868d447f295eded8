/*
 * The members of an event run packed for event_runs, in C (an optional accelerator).
 *
 * pack_run_types(types) and pack_run_times(times) return exactly what
 * readmodel.store.blocks' Python paths return (a property test holds them
 * equal): msgpack, in msgspec's smallest encodings, of the types run-length
 * coded as [type, repeat, type, repeat, ...], and of the times as
 * [t0, t1 - t0, t2 - t1, ...].  Every flush of a projector packs its runs;
 * the Python paths build an intermediate list and group it element by element.
 *
 * int_run(values) answers (first, count) when ``values`` is a non-empty list of
 * exact ints first, first + 1, ..., first + count - 1 (64-bit), else None: the
 * common sourceEventSeqs (an answer citing its chunks), which the fold and the
 * projector otherwise check, sort and de-duplicate element by element.
 *
 * Only the common inputs are handled: a list of exact str (encodable as UTF-8)
 * or of exact ints whose deltas fit 64 bits.  Anything else returns None and
 * the caller takes its Python path, which also raises what it raised before.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

typedef struct {
    unsigned char *data;
    Py_ssize_t size, capacity;
} Buffer;

static int reserve(Buffer *out, Py_ssize_t more) {
    if (out->size + more <= out->capacity) return 0;
    Py_ssize_t capacity = out->capacity ? out->capacity : 64;
    while (capacity < out->size + more) capacity *= 2;
    unsigned char *data = PyMem_Realloc(out->data, (size_t)capacity);
    if (data == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    out->data = data;
    out->capacity = capacity;
    return 0;
}

static void put_be(Buffer *out, uint64_t value, int width) {
    for (int shift = (width - 1) * 8; shift >= 0; shift -= 8) out->data[out->size++] = (unsigned char)(value >> shift);
}

static int put_header(Buffer *out, unsigned char tag, uint64_t value, int width) {
    if (reserve(out, 1 + width) < 0) return -1;
    out->data[out->size++] = tag;
    put_be(out, value, width);
    return 0;
}

static int put_array_header(Buffer *out, Py_ssize_t length) {
    if (length <= 15) return put_header(out, (unsigned char)(0x90 | length), 0, 0);
    if (length <= 0xFFFF) return put_header(out, 0xdc, (uint64_t)length, 2);
    return put_header(out, 0xdd, (uint64_t)length, 4);
}

static int put_int(Buffer *out, int64_t value) {
    if (value >= 0) {
        uint64_t v = (uint64_t)value;
        if (v <= 0x7F) return put_header(out, (unsigned char)v, 0, 0);
        if (v <= 0xFF) return put_header(out, 0xcc, v, 1);
        if (v <= 0xFFFF) return put_header(out, 0xcd, v, 2);
        if (v <= 0xFFFFFFFFu) return put_header(out, 0xce, v, 4);
        return put_header(out, 0xcf, v, 8);
    }
    if (value >= -32) return put_header(out, (unsigned char)(value & 0xFF), 0, 0);
    if (value >= -128) return put_header(out, 0xd0, (uint64_t)value & 0xFF, 1);
    if (value >= -32768) return put_header(out, 0xd1, (uint64_t)value & 0xFFFF, 2);
    if (value >= -2147483648LL) return put_header(out, 0xd2, (uint64_t)value & 0xFFFFFFFFu, 4);
    return put_header(out, 0xd3, (uint64_t)value, 8);
}

static int put_str(Buffer *out, const char *text, Py_ssize_t length) {
    int failed;
    if (length <= 31) failed = put_header(out, (unsigned char)(0xa0 | length), 0, 0);
    else if (length <= 0xFF) failed = put_header(out, 0xd9, (uint64_t)length, 1);
    else if (length <= 0xFFFF) failed = put_header(out, 0xda, (uint64_t)length, 2);
    else failed = put_header(out, 0xdb, (uint64_t)length, 4);
    if (failed || reserve(out, length) < 0) return -1;
    memcpy(out->data + out->size, text, (size_t)length);
    out->size += length;
    return 0;
}

static PyObject *finish(Buffer *out) {
    PyObject *result = PyByteArray_FromStringAndSize((const char *)out->data, out->size);
    PyMem_Free(out->data);
    return result;
}

static PyObject *fallback(Buffer *out) {
    PyMem_Free(out->data);
    if (PyErr_Occurred()) {
        if (!PyErr_ExceptionMatches(PyExc_MemoryError)) PyErr_Clear(); /* the Python path raises its own */
        else return NULL;
    }
    Py_RETURN_NONE;
}

static PyObject *pack_run_types(PyObject *self, PyObject *types) {
    if (!PyList_CheckExact(types)) Py_RETURN_NONE;
    Py_ssize_t count = PyList_GET_SIZE(types), groups = 0;
    for (Py_ssize_t at = 0; at < count; at++) {
        PyObject *item = PyList_GET_ITEM(types, at);
        if (!PyUnicode_CheckExact(item)) Py_RETURN_NONE;
        if (at == 0 || (item != PyList_GET_ITEM(types, at - 1) && PyUnicode_Compare(item, PyList_GET_ITEM(types, at - 1)) != 0)) groups++;
    }
    Buffer out = {NULL, 0, 0};
    if (put_array_header(&out, 2 * groups) < 0) return fallback(&out);
    Py_ssize_t start = 0;
    for (Py_ssize_t at = 1; at <= count; at++) {
        PyObject *first = PyList_GET_ITEM(types, start);
        if (at < count) {
            PyObject *item = PyList_GET_ITEM(types, at);
            if (item == first || PyUnicode_Compare(item, first) == 0) continue;
        }
        Py_ssize_t length;
        const char *text = PyUnicode_AsUTF8AndSize(first, &length);
        if (text == NULL || put_str(&out, text, length) < 0 || put_int(&out, (int64_t)(at - start)) < 0) return fallback(&out);
        start = at;
    }
    return finish(&out);
}

static int exact_int64(PyObject *item, int64_t *value) {
    if (!PyLong_CheckExact(item)) return -1;
    int overflow;
    long long v = PyLong_AsLongLongAndOverflow(item, &overflow);
    if (overflow || (v == -1 && PyErr_Occurred())) return -1;
    *value = (int64_t)v;
    return 0;
}

static PyObject *pack_run_times(PyObject *self, PyObject *times) {
    if (!PyList_CheckExact(times) || PyList_GET_SIZE(times) == 0) Py_RETURN_NONE;
    Py_ssize_t count = PyList_GET_SIZE(times);
    Buffer out = {NULL, 0, 0};
    int64_t previous = 0;
    if (put_array_header(&out, count) < 0) return fallback(&out);
    for (Py_ssize_t at = 0; at < count; at++) {
        int64_t value;
        if (exact_int64(PyList_GET_ITEM(times, at), &value) < 0) return fallback(&out);
        if (at > 0) {
            int64_t delta;
            if (__builtin_sub_overflow(value, previous, &delta)) return fallback(&out);
            if (put_int(&out, delta) < 0) return fallback(&out);
        } else if (put_int(&out, value) < 0) {
            return fallback(&out);
        }
        previous = value;
    }
    return finish(&out);
}

static PyObject *int_run(PyObject *self, PyObject *values) {
    if (!PyList_CheckExact(values) || PyList_GET_SIZE(values) == 0) Py_RETURN_NONE;
    Py_ssize_t count = PyList_GET_SIZE(values);
    int64_t first = 0;
    for (Py_ssize_t at = 0; at < count; at++) {
        int64_t value;
        if (exact_int64(PyList_GET_ITEM(values, at), &value) < 0) {
            PyErr_Clear();
            Py_RETURN_NONE;
        }
        if (at == 0) first = value;
        else if (first > INT64_MAX - at || value != first + at) Py_RETURN_NONE;
    }
    return Py_BuildValue("(Ln)", (long long)first, count);
}

static PyMethodDef methods[] = {
    {"int_run", int_run, METH_O, "(first, count) when the list is the exact ints first..first+count-1, else None."},
    {"pack_run_types", pack_run_types, METH_O, "A run's types, run-length coded in msgpack (None: take the Python path)."},
    {"pack_run_times", pack_run_times, METH_O, "A run's times as msgpack deltas (None: take the Python path)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_runpack", "Event runs' members packed (optional accelerator).", -1, methods};

PyMODINIT_FUNC PyInit__runpack(void) { return PyModule_Create(&module); }
