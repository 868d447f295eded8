/*
 * FTS5 auxiliary functions that answer, without building highlighted text,
 * the two questions search asks of highlight():
 *
 *   sessionq_spans(tbl)        how many highlighted spans highlight(tbl, 0, ...)
 *                              would mark in the current row;
 *   sessionq_snippet_source(tbl, ...)  the part of highlight()'s output that a
 *                              snippet can depend on: the text around the first
 *                              span, with markers (see below);
 *   sessionq_tokens(text, spec)  the tokens FTS5's tokenizer ``spec`` (e.g.
 *                              'unicode61') makes of a document, as FTS5's
 *                              index stores them (at most 32,768 bytes each),
 *                              joined by NUL bytes into one blob.
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
#include <limits.h>
#include <string.h>

/* sqlite3.h carries FTS5's extension API (Fts5ExtensionApi, fts5_api). */
#define HIGHLIGHT_COLUMN 0

/* Hands a built string to SQLite as the function's result (and frees the builder). */
static void result_text(sqlite3_context *ctx, sqlite3_str *out) {
    int rc = sqlite3_str_errcode(out);
    int size = sqlite3_str_length(out);
    char *text = sqlite3_str_finish(out);
    if (rc != SQLITE_OK || text == NULL) {
        sqlite3_free(text);
        sqlite3_result_error_nomem(ctx);
        return;
    }
    sqlite3_result_text(ctx, text, size, sqlite3_free);
}

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

/* Spans of a one-phrase query, straight from the phrase's position list: the
 * instance array xInst reads is built (and sorted across phrases) per row. */
static int single_phrase_spans(const Fts5ExtensionApi *api, Fts5Context *fts, sqlite3_int64 *spans) {
    Fts5PhraseIter iter;
    int column, offset;
    int size = api->xPhraseSize(fts, 0);
    int end = -1;
    int rc = api->xPhraseFirst(fts, 0, &iter, &column, &offset);
    if (rc != SQLITE_OK) return rc;
    for (; column >= 0; api->xPhraseNext(fts, &iter, &column, &offset)) {
        if (column != HIGHLIGHT_COLUMN) continue;
        if (offset > end) (*spans)++;
        if (offset + size - 1 > end) end = offset + size - 1;
    }
    return SQLITE_OK;
}

static void spans_function(const Fts5ExtensionApi *api, Fts5Context *fts, sqlite3_context *ctx, int argc, sqlite3_value **argv) {
    (void)argc;
    (void)argv;
    sqlite3_int64 spans = 0;
    int rc;
    if (api->xPhraseCount(fts) == 1) {
        rc = single_phrase_spans(api, fts, &spans);
    } else {
        SpanWalk walk;
        rc = span_walk_init(&walk, api, fts);
        while (rc == SQLITE_OK) {
            rc = span_walk_next(&walk);
            if (rc != SQLITE_OK || walk.start < 0) break;
            spans++;
        }
    }
    if (rc != SQLITE_OK) {
        sqlite3_result_error_code(ctx, rc);
        return;
    }
    sqlite3_result_int64(ctx, spans);
}

/* ---- sessionq_snippet_source -------------------------------------------------
 *
 * sessionq_snippet_source(tbl, open, close, before_chars, after_bytes) returns
 * the part of highlight(tbl, 0, open, close) a snippet can depend on:
 *
 *   flags || head || window
 *
 * head is the text just before the first span (at most before_chars code
 * points; it holds no markers), window is highlight()'s output from the first
 * span on, for at least after_bytes bytes of the text and then up to the next
 * token that would start beyond them outside a span.  flags is one character,
 * '0' + (1 if head is cut short) + (2 if window reaches the end of the text).
 * head || window is therefore exactly a substring of highlight()'s output, and
 * its prefix when head is whole.  NULL when the row has no span in column 0.
 */

typedef struct {
    SpanWalk walk;
    const char *text;
    int size;
    int position;      /* position of the next non-colocated token */
    int first;         /* byte offset where the first span starts, -1 until found */
    int copied;        /* bytes of text already in the window */
    int open;          /* a span is open in the window */
    int after_bytes;
    int cut;           /* byte offset where the window stops, -1: at the end */
    int rc;
    sqlite3_str *window;
    const char *open_mark;
    const char *close_mark;
} Window;

static void window_copy(Window *w, int upto) {
    if (upto > w->copied) sqlite3_str_append(w->window, w->text + w->copied, upto - w->copied);
    if (upto > w->copied) w->copied = upto;
}

static int window_callback(void *data, int flags, const char *token, int n_token, int start, int end) {
    (void)token;
    (void)n_token;
    Window *w = (Window *)data;
    if (flags & FTS5_TOKEN_COLOCATED) return SQLITE_OK; /* shares the previous token's position */
    int position = w->position++;
    if (w->walk.start < 0 || position < w->walk.start) {
        /* Between spans (or after the last one): stop once far enough past the first. */
        if (w->first >= 0 && !w->open && start - w->first > w->after_bytes) {
            w->cut = start;
            return SQLITE_DONE;
        }
        return SQLITE_OK;
    }
    if (position == w->walk.start) {
        if (w->first < 0) {
            w->first = start;
            w->copied = start;
        } else if (start - w->first > w->after_bytes) {
            w->cut = start;
            return SQLITE_DONE;
        }
        window_copy(w, start);
        sqlite3_str_appendall(w->window, w->open_mark);
        w->open = 1;
    }
    if (position == w->walk.end) {
        window_copy(w, end);
        sqlite3_str_appendall(w->window, w->close_mark);
        w->open = 0;
        w->rc = span_walk_next(&w->walk);
        if (w->rc != SQLITE_OK) return w->rc;
    }
    return SQLITE_OK;
}

/* Start of the `chars` code points before byte offset `at` (UTF-8). */
static int chars_before(const char *text, int at, int chars) {
    int i = at;
    while (i > 0 && chars > 0) {
        i--;
        if (((unsigned char)text[i] & 0xC0) != 0x80) chars--;
    }
    while (i > 0 && ((unsigned char)text[i] & 0xC0) == 0x80) i--; /* never start inside a character */
    return i;
}

/* An argument as a non-negative int (a larger window is the whole text anyway). */
static int clamped_int(sqlite3_value *value) {
    sqlite3_int64 wide = sqlite3_value_int64(value);
    return wide < 0 ? 0 : wide > INT_MAX ? INT_MAX : (int)wide;
}

static void snippet_source_function(const Fts5ExtensionApi *api, Fts5Context *fts, sqlite3_context *ctx, int argc, sqlite3_value **argv) {
    if (argc != 4) {
        sqlite3_result_error(ctx, "sessionq_snippet_source(tbl, open, close, before_chars, after_bytes)", -1);
        return;
    }
    Window w;
    memset(&w, 0, sizeof w);
    w.first = -1;
    w.cut = -1;
    w.open_mark = (const char *)sqlite3_value_text(argv[0]);
    w.close_mark = (const char *)sqlite3_value_text(argv[1]);
    int before_chars = clamped_int(argv[2]);
    w.after_bytes = clamped_int(argv[3]);
    if (w.open_mark == NULL) w.open_mark = "";
    if (w.close_mark == NULL) w.close_mark = "";
    int rc = span_walk_init(&w.walk, api, fts);
    if (rc == SQLITE_OK) rc = span_walk_next(&w.walk);
    if (rc == SQLITE_OK && w.walk.start < 0) {
        sqlite3_result_null(ctx);
        return;
    }
    if (rc == SQLITE_OK) rc = api->xColumnText(fts, HIGHLIGHT_COLUMN, &w.text, &w.size);
    if (rc != SQLITE_OK) {
        sqlite3_result_error_code(ctx, rc);
        return;
    }
    w.window = sqlite3_str_new(NULL);
    rc = api->xTokenize(fts, w.text, w.size, &w, window_callback);
    if (rc == SQLITE_DONE) rc = SQLITE_OK;
    if (rc == SQLITE_OK) rc = w.rc;
    if (rc != SQLITE_OK || w.first < 0) {
        sqlite3_free(sqlite3_str_finish(w.window));
        if (rc != SQLITE_OK) sqlite3_result_error_code(ctx, rc);
        else sqlite3_result_null(ctx);
        return;
    }
    window_copy(&w, w.cut < 0 ? w.size : w.cut);
    int head = chars_before(w.text, w.first, before_chars);
    sqlite3_str *out = sqlite3_str_new(NULL);
    sqlite3_str_appendchar(out, 1, (char)('0' + (head > 0 ? 1 : 0) + (w.cut < 0 ? 2 : 0)));
    sqlite3_str_append(out, w.text + head, w.first - head);
    int window_size = sqlite3_str_length(w.window);
    char *window = sqlite3_str_finish(w.window);
    if (window != NULL) sqlite3_str_append(out, window, window_size);
    sqlite3_free(window);
    result_text(ctx, out);
}

/* ---- tokens --------------------------------------------------------------- */

/* FTS5 stores at most this many bytes of a token (FTS5_MAX_TOKEN_SIZE); longer
 * tokens are cut there, possibly inside a UTF-8 sequence, hence a blob. */
#define MAX_TOKEN_BYTES 32768
#define MAX_SPEC_WORDS 16

static int token_callback(void *context, int flags, const char *token, int size, int start, int end) {
    (void)start;
    (void)end;
    sqlite3_str *out = (sqlite3_str *)context;
    if (flags & FTS5_TOKEN_COLOCATED) return SQLITE_OK; /* a synonym at the same position: not a new token */
    if (size > MAX_TOKEN_BYTES) size = MAX_TOKEN_BYTES;
    if (sqlite3_str_length(out) > 0 || sqlite3_str_errcode(out) != SQLITE_OK) sqlite3_str_appendchar(out, 1, 0);
    sqlite3_str_append(out, token, size);
    /* An empty token would be ambiguous in the joined blob; FTS5 never emits one. */
    return sqlite3_str_errcode(out) == SQLITE_OK ? SQLITE_OK : SQLITE_NOMEM;
}

/* sessionq_tokens(text, spec): spec is the tokenize= option's words (name, then arguments). */
static void tokens_function(sqlite3_context *ctx, int argc, sqlite3_value **argv) {
    fts5_api *api = (fts5_api *)sqlite3_user_data(ctx);
    (void)argc;
    if (sqlite3_value_type(argv[0]) == SQLITE_NULL) return;
    const char *text = (const char *)sqlite3_value_text(argv[0]);
    int size = sqlite3_value_bytes(argv[0]);
    const char *spec = (const char *)sqlite3_value_text(argv[1]);
    if (text == NULL || spec == NULL) {
        sqlite3_result_error_nomem(ctx);
        return;
    }
    char *words = sqlite3_mprintf("%s", spec);
    const char *argv_spec[MAX_SPEC_WORDS];
    int count = 0;
    for (char *p = words, *save = NULL, *word; words != NULL && (word = strtok_r(p, " ", &save)) != NULL; p = NULL) {
        if (count == MAX_SPEC_WORDS) break;
        argv_spec[count++] = word;
    }
    if (count == 0) {
        sqlite3_free(words);
        sqlite3_result_error(ctx, "sessionq_tokens: an empty tokenizer spec", -1);
        return;
    }
    void *user = NULL;
    fts5_tokenizer tokenizer;
    Fts5Tokenizer *instance = NULL;
    int rc = api->xFindTokenizer(api, argv_spec[0], &user, &tokenizer);
    if (rc == SQLITE_OK) rc = tokenizer.xCreate(user, argv_spec + 1, count - 1, &instance);
    sqlite3_free(words);
    if (rc != SQLITE_OK) {
        sqlite3_result_error(ctx, "sessionq_tokens: no such tokenizer, or bad arguments", -1);
        return;
    }
    sqlite3_str *out = sqlite3_str_new(NULL);
    rc = tokenizer.xTokenize(instance, out, FTS5_TOKENIZE_DOCUMENT, text, size, token_callback);
    tokenizer.xDelete(instance);
    int length = sqlite3_str_length(out);
    unsigned char *blob = (unsigned char *)sqlite3_str_finish(out);
    if (rc != SQLITE_OK || (length > 0 && blob == NULL)) {
        sqlite3_free(blob);
        sqlite3_result_error_code(ctx, rc != SQLITE_OK ? rc : SQLITE_NOMEM);
        return;
    }
    if (blob == NULL) sqlite3_result_zeroblob(ctx, 0);
    else sqlite3_result_blob(ctx, blob, length, sqlite3_free);
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
    if (sqlite3_create_function_v2(db, "sessionq_tokens", 2, SQLITE_UTF8 | SQLITE_DETERMINISTIC, api, tokens_function, NULL,
                                   NULL, NULL) != SQLITE_OK ||
        api->xCreateFunction(api, "sessionq_spans", NULL, spans_function, NULL) != SQLITE_OK ||
        api->xCreateFunction(api, "sessionq_snippet_source", NULL, snippet_source_function, NULL) != SQLITE_OK) {
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
     "register(connection): add sessionq_spans(), sessionq_snippet_source() and sessionq_tokens() to a sqlite3.Connection."},
    {"library_version", library_version, METH_NOARGS,
     "The SQLITE_VERSION_NUMBER of the SQLite library this module is linked with."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_definition = {
    PyModuleDef_HEAD_INIT, "readmodel.search._ftsaux", "FTS5 auxiliary functions for exact span counts.", -1, methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__ftsaux(void) { return PyModule_Create(&module_definition); }
