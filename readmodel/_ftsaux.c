/*
 * FTS5 auxiliary functions that answer, without building highlighted text,
 * the two questions search asks of highlight():
 *
 *   sessionq_spans(tbl)        how many highlighted spans highlight(tbl, 0, ...)
 *                              would mark in the current row;
 *   sessionq_first_span(tbl)   the byte offset in column 0 where the first of
 *                              those spans starts (NULL when there is none).
 *
 * Both follow highlight()'s own rule for grouping phrase instances: instances
 * come in position order, and one that starts at or before the last token of
 * the open span extends it; anything later opens a new span.  So they count
 * from FTS5's instance list (a few nanoseconds per instance) instead of
 * tokenising and copying whole documents.
 *
 * The module registers them on a Python sqlite3.Connection through FTS5's
 * fts5_api, which SQLite hands out only to C code (via sqlite3_bind_pointer).
 * Python's sqlite3 module has no public C API for its connection, so the
 * sqlite3* handle is read from the connection object, where CPython keeps it
 * as the first member after the object header (true from 3.2 to at least 3.14;
 * the Python wrapper checks the version and the SQLite library before calling).
 *
 * Built as an optional extension: without it, search counts spans in SQL.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <sqlite3.h>

/* sqlite3.h carries FTS5's extension API (Fts5ExtensionApi, fts5_api). */
#define HIGHLIGHT_COLUMN 0

/* Walks the instances of one column as highlight() groups them into spans. */
typedef struct {
    const Fts5ExtensionApi *api;
    Fts5Context *fts;
    int count;     /* instances in the row, all columns */
    int next;      /* next instance to look at */
    int start;     /* token position where the current span starts, -1: none */
    int end;       /* token position of its last token */
} SpanWalk;

static int span_walk_init(SpanWalk *walk, const Fts5ExtensionApi *api, Fts5Context *fts) {
    walk->api = api;
    walk->fts = fts;
    walk->next = 0;
    walk->start = -1;
    walk->end = -1;
    return api->xInstCount(fts, &walk->count);
}

/* Advances to the next span; walk->start < 0 afterwards means there is none. */
static int span_walk_next(SpanWalk *walk) {
    walk->start = -1;
    walk->end = -1;
    while (walk->next < walk->count) {
        int phrase, column, offset;
        int rc = walk->api->xInst(walk->fts, walk->next, &phrase, &column, &offset);
        if (rc != SQLITE_OK) return rc;
        if (column == HIGHLIGHT_COLUMN) {
            int last = offset + walk->api->xPhraseSize(walk->fts, phrase) - 1;
            if (walk->start < 0) {
                walk->start = offset;
                walk->end = last;
            } else if (offset <= walk->end) {
                if (last > walk->end) walk->end = last;
            } else {
                break; /* starts a later span: leave it for the next call */
            }
        }
        walk->next++;
    }
    return SQLITE_OK;
}

static void spans_function(const Fts5ExtensionApi *api, Fts5Context *fts, sqlite3_context *ctx, int argc, sqlite3_value **argv) {
    (void)argc;
    (void)argv;
    SpanWalk walk;
    int rc = span_walk_init(&walk, api, fts);
    sqlite3_int64 spans = 0;
    while (rc == SQLITE_OK) {
        rc = span_walk_next(&walk);
        if (rc != SQLITE_OK || walk.start < 0) break;
        spans++;
    }
    if (rc != SQLITE_OK) {
        sqlite3_result_error_code(ctx, rc);
        return;
    }
    sqlite3_result_int64(ctx, spans);
}

/* Tokeniser callback state: find the byte offset of token position `target`. */
typedef struct {
    int position; /* position of the next non-colocated token */
    int target;
    int offset;   /* byte offset found, -1 until then */
} FirstToken;

static int first_token_callback(void *data, int flags, const char *token, int n_token, int start, int end) {
    (void)token;
    (void)n_token;
    (void)end;
    FirstToken *found = (FirstToken *)data;
    if (flags & FTS5_TOKEN_COLOCATED) return SQLITE_OK; /* shares the previous token's position */
    if (found->position++ == found->target) {
        found->offset = start;
        return SQLITE_DONE; /* stop tokenising: the rest of the text cannot matter */
    }
    return SQLITE_OK;
}

static void first_span_function(const Fts5ExtensionApi *api, Fts5Context *fts, sqlite3_context *ctx, int argc, sqlite3_value **argv) {
    (void)argc;
    (void)argv;
    SpanWalk walk;
    int rc = span_walk_init(&walk, api, fts);
    if (rc == SQLITE_OK) rc = span_walk_next(&walk);
    if (rc != SQLITE_OK) {
        sqlite3_result_error_code(ctx, rc);
        return;
    }
    if (walk.start < 0) {
        sqlite3_result_null(ctx);
        return;
    }
    const char *text = NULL;
    int size = 0;
    rc = api->xColumnText(fts, HIGHLIGHT_COLUMN, &text, &size);
    if (rc != SQLITE_OK) {
        sqlite3_result_error_code(ctx, rc);
        return;
    }
    FirstToken found = {0, walk.start, -1};
    rc = api->xTokenize(fts, text, size, &found, first_token_callback);
    if (rc != SQLITE_OK && rc != SQLITE_DONE) {
        sqlite3_result_error_code(ctx, rc);
        return;
    }
    if (found.offset < 0) {
        sqlite3_result_null(ctx);
        return;
    }
    sqlite3_result_int(ctx, found.offset);
}

/* ---- registration --------------------------------------------------------- */

/* CPython's sqlite3.Connection starts with the object header, then sqlite3*. */
typedef struct {
    PyObject_HEAD
    sqlite3 *db;
} ConnectionPrefix;

static fts5_api *fts5_api_of(sqlite3 *db) {
    fts5_api *api = NULL;
    sqlite3_stmt *stmt = NULL;
    if (sqlite3_prepare_v2(db, "SELECT fts5(?1)", -1, &stmt, NULL) != SQLITE_OK) return NULL;
    sqlite3_bind_pointer(stmt, 1, (void *)&api, "fts5_api_ptr", NULL);
    sqlite3_step(stmt);
    sqlite3_finalize(stmt);
    return api;
}

static PyObject *register_functions(PyObject *module, PyObject *connection) {
    (void)module;
    sqlite3 *db = ((ConnectionPrefix *)connection)->db;
    if (db == NULL) {
        PyErr_SetString(PyExc_ValueError, "the connection is closed");
        return NULL;
    }
    fts5_api *api = fts5_api_of(db);
    if (api == NULL || api->iVersion < 2) {
        PyErr_SetString(PyExc_RuntimeError, "this SQLite has no FTS5 extension API");
        return NULL;
    }
    if (api->xCreateFunction(api, "sessionq_spans", NULL, spans_function, NULL) != SQLITE_OK ||
        api->xCreateFunction(api, "sessionq_first_span", NULL, first_span_function, NULL) != SQLITE_OK) {
        PyErr_SetString(PyExc_RuntimeError, "registering the FTS5 functions failed");
        return NULL;
    }
    Py_RETURN_NONE;
}

static PyObject *library_version(PyObject *module, PyObject *unused) {
    (void)module;
    (void)unused;
    return PyLong_FromLong(sqlite3_libversion_number());
}

static PyMethodDef methods[] = {
    {"register", register_functions, METH_O,
     "register(connection): add sessionq_spans() and sessionq_first_span() to a sqlite3.Connection."},
    {"library_version", library_version, METH_NOARGS,
     "The SQLITE_VERSION_NUMBER of the SQLite library this module is linked with."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_definition = {
    PyModuleDef_HEAD_INIT, "readmodel._ftsaux", "FTS5 auxiliary functions for exact span counts.", -1, methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__ftsaux(void) { return PyModule_Create(&module_definition); }
