/*
 * The words of a document's grams for the substring candidate index, in C.
 *
 * Computes exactly what readmodel.projection.grams.document_tokens computes in
 * Python (a property test holds them equal as sets): fold every code point
 * through the table the Python side installs (its simple-fold class
 * representative; JS whitespace becomes a space), then collect
 *
 *   - every bigram of " " + folded text + " " except two spaces, as the key
 *     first << 21 | second, and
 *   - every non-ASCII folded code point, as its own key,
 *   - and, from trigram_tokens for a long document, every trigram of " " +
 *     folded text + " " with each run of spaces one space,
 *
 * each key once, rendered in lowercase hexadecimal, separated by spaces.
 * A long document costs a few nanoseconds per code point instead of the
 * Python path's tens, which is what keeps the gram index inside the cold
 * build's budget.  Built as an optional extension: without it the Python
 * path gives the same words.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define FOLD_LIMIT 0x20000u     /* no code point at or above this one folds */
#define SHIFT 21
#define SPACE 0x20u
#define DOUBLE_SPACE (((uint64_t)SPACE << SHIFT) | SPACE)
#define EMPTY UINT64_MAX

static uint32_t *fold_table = NULL;

/* An open-addressing set of keys that remembers insertion order. */
typedef struct {
    uint64_t *slots;
    size_t mask;
    uint64_t *order;
    size_t count;
} KeySet;

static int keyset_init(KeySet *set, size_t expected) {
    size_t size = 64;
    while (size < expected * 2) size <<= 1;
    set->slots = malloc(size * sizeof(uint64_t));
    set->order = malloc((size / 2 + 1) * sizeof(uint64_t));
    if (set->slots == NULL || set->order == NULL) return -1;
    memset(set->slots, 0xff, size * sizeof(uint64_t));
    set->mask = size - 1;
    set->count = 0;
    return 0;
}

static void keyset_free(KeySet *set) {
    free(set->slots);
    free(set->order);
}

static inline size_t slot_of(uint64_t key, size_t mask) {
    key *= 0x9E3779B97F4A7C15ull;
    return (size_t)(key >> 17) & mask;
}

static int keyset_grow(KeySet *set) {
    size_t size = (set->mask + 1) * 2;
    uint64_t *slots = malloc(size * sizeof(uint64_t));
    uint64_t *order = realloc(set->order, (size / 2 + 1) * sizeof(uint64_t));
    if (slots == NULL || order == NULL) {
        free(slots);
        if (order != NULL) set->order = order;
        return -1;
    }
    set->order = order;
    memset(slots, 0xff, size * sizeof(uint64_t));
    for (size_t i = 0; i < set->count; i++) {
        size_t at = slot_of(order[i], size - 1);
        while (slots[at] != EMPTY) at = (at + 1) & (size - 1);
        slots[at] = order[i];
    }
    free(set->slots);
    set->slots = slots;
    set->mask = size - 1;
    return 0;
}

static inline int keyset_add(KeySet *set, uint64_t key) {
    size_t at = slot_of(key, set->mask);
    while (set->slots[at] != EMPTY) {
        if (set->slots[at] == key) return 0;
        at = (at + 1) & set->mask;
    }
    set->slots[at] = key;
    set->order[set->count++] = key;
    if (set->count * 2 > set->mask + 1) return keyset_grow(set);
    return 0;
}

/* Append ``key`` in lowercase hex (16 digits hold any key) to out at size, after a
 * space unless it is the first word; returns the new size. */
static inline size_t put_word(char *out, size_t size, uint64_t key) {
    static const char digits[] = "0123456789abcdef";
    char buffer[16];
    int n = 0;
    do {
        buffer[n++] = digits[key & 0xf];
        key >>= 4;
    } while (key);
    if (size) out[size++] = ' ';
    while (n) out[size++] = buffer[--n];
    return size;
}

/* The keys in lowercase hex, separated by spaces, as a str. */
static PyObject *render(const KeySet *set) {
    char *out = malloc(set->count * 17 + 1);
    if (out == NULL) return PyErr_NoMemory();
    size_t size = 0;
    for (size_t i = 0; i < set->count; i++) size = put_word(out, size, set->order[i]);
    PyObject *result = PyUnicode_DecodeASCII(out, (Py_ssize_t)size, NULL);
    free(out);
    return result;
}

static PyObject *install_fold_table(PyObject *self, PyObject *arg) {
    Py_buffer view;
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0) return NULL;
    if ((size_t)view.len != FOLD_LIMIT * sizeof(uint32_t)) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_ValueError, "the fold table must hold 0x20000 native uint32 code points");
        return NULL;
    }
    uint32_t *table = malloc(view.len);
    if (table == NULL) {
        PyBuffer_Release(&view);
        return PyErr_NoMemory();
    }
    memcpy(table, view.buf, view.len);
    PyBuffer_Release(&view);
    free(fold_table);
    fold_table = table;
    Py_RETURN_NONE;
}

/* Bigrams of " " + folded text + " " (except two spaces) and non-ASCII code points.
 * Returns non-zero when memory ran out. */
static int collect_grams(int kind, const void *data, Py_ssize_t length, KeySet *set) {
    uint32_t prev = SPACE;
    int failed = 0;
    for (Py_ssize_t i = 0; i < length && !failed; i++) {
        uint32_t cp = PyUnicode_READ(kind, data, i);
        uint32_t folded = cp < FOLD_LIMIT ? fold_table[cp] : cp;
        uint64_t key = ((uint64_t)prev << SHIFT) | folded;
        if (key != DOUBLE_SPACE) failed |= keyset_add(set, key);
        if (folded > 0x7f) failed |= keyset_add(set, folded);
        prev = folded;
    }
    uint64_t last = ((uint64_t)prev << SHIFT) | SPACE;
    if (!failed && last != DOUBLE_SPACE) failed |= keyset_add(set, last);
    return failed;
}

/* Trigrams of three ASCII code points, one bit each (index a << 14 | b << 7 | c): in a
 * long tool output most trigrams are ASCII, and setting a bit in this 256 KiB map
 * (it stays in the core's L2 cache) costs a fraction of a probe of a hash set of
 * hundreds of thousands of keys (a cache miss per code point).  Used for documents
 * of at least ASCII_MAP_MIN code points, below which the set is small anyway; the
 * words are the same set of keys, in another order.  trigram_tokens sets the map up
 * for one call (the GIL is held throughout) and frees it; otherwise it is NULL and
 * every trigram goes to the set. */
#define ASCII_MAP_BITS (1u << 21)
#define ASCII_MAP_MIN 16384
static uint64_t *ascii_map = NULL;
static size_t ascii_map_count = 0;

static inline int ascii_trigram(uint32_t a, uint32_t b, uint32_t c, KeySet *set) {
    if (ascii_map != NULL && (a | b | c) < 0x80u) {
        uint32_t index = (a << 14) | (b << 7) | c;
        uint64_t bit = (uint64_t)1 << (index & 63);
        uint64_t *word = &ascii_map[index >> 6];
        ascii_map_count += !(*word & bit);
        *word |= bit;
        return 0;
    }
    return keyset_add(set, ((uint64_t)a << (2 * SHIFT)) | ((uint64_t)b << SHIFT) | c);
}

/* Trigrams of " " + folded text + " " with each run of spaces one space, as
 * first << 42 | second << 21 | third (the ASCII ones into ascii_map while the
 * caller has set it up).  Returns non-zero when memory ran out. */
static int collect_trigrams(int kind, const void *data, Py_ssize_t length, KeySet *set) {
    const uint32_t none = UINT32_MAX;
    uint32_t before = none, prev = SPACE;
    int failed = 0;
    for (Py_ssize_t i = 0; i < length && !failed; i++) {
        uint32_t cp = PyUnicode_READ(kind, data, i);
        uint32_t folded = cp < FOLD_LIMIT ? fold_table[cp] : cp;
        if (folded == SPACE && prev == SPACE) continue;
        if (before != none) failed |= ascii_trigram(before, prev, folded, set);
        before = prev;
        prev = folded;
    }
    if (!failed && prev != SPACE && before != none) failed |= ascii_trigram(before, prev, SPACE, set);
    return failed;
}

/* The words of ascii_map's keys and then of set's, separated by spaces. */
static PyObject *render_mapped(const KeySet *set) {
    char *out = malloc((ascii_map_count + set->count) * 17 + 1);
    if (out == NULL) return PyErr_NoMemory();
    size_t size = 0;
    for (size_t w = 0; w < ASCII_MAP_BITS / 64; w++) {
        uint64_t bits = ascii_map[w];
        while (bits) {
            uint32_t index = (uint32_t)(w * 64 + (size_t)__builtin_ctzll(bits));
            bits &= bits - 1;
            size = put_word(out, size, ((uint64_t)(index >> 14) << (2 * SHIFT)) | ((uint64_t)((index >> 7) & 0x7f) << SHIFT) | (index & 0x7f));
        }
    }
    for (size_t i = 0; i < set->count; i++) size = put_word(out, size, set->order[i]);
    PyObject *result = PyUnicode_DecodeASCII(out, (Py_ssize_t)size, NULL);
    free(out);
    return result;
}

typedef int (*Collector)(int kind, const void *data, Py_ssize_t length, KeySet *set);

/* The words of the keys ``collect`` finds in the str ``arg``. */
static PyObject *tokens_of(PyObject *arg, Collector collect) {
    if (!PyUnicode_Check(arg)) {
        PyErr_SetString(PyExc_TypeError, "a str is required");
        return NULL;
    }
    if (fold_table == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "install_fold_table must be called first");
        return NULL;
    }
    Py_ssize_t length = PyUnicode_GET_LENGTH(arg);
    KeySet set;
    /* Distinct grams grow far slower than the text: start small, grow on demand. */
    if (keyset_init(&set, length < 4096 ? (size_t)length + 2 : 4096) < 0 || collect(PyUnicode_KIND(arg), PyUnicode_DATA(arg), length, &set)) {
        keyset_free(&set);
        return PyErr_NoMemory();
    }
    PyObject *result = render(&set);
    keyset_free(&set);
    return result;
}

static PyObject *document_tokens(PyObject *self, PyObject *arg) { return tokens_of(arg, collect_grams); }

static PyObject *trigram_tokens(PyObject *self, PyObject *arg) {
    if (!PyUnicode_Check(arg) || fold_table == NULL || PyUnicode_GET_LENGTH(arg) < ASCII_MAP_MIN) return tokens_of(arg, collect_trigrams);
    uint64_t *map = calloc(ASCII_MAP_BITS / 64, sizeof(uint64_t));
    if (map == NULL) return PyErr_NoMemory();
    ascii_map = map;
    ascii_map_count = 0;
    KeySet set;  /* the trigrams with a non-ASCII code point: few */
    PyObject *result = NULL;
    if (keyset_init(&set, 256) < 0 || collect_trigrams(PyUnicode_KIND(arg), PyUnicode_DATA(arg), PyUnicode_GET_LENGTH(arg), &set))
        PyErr_NoMemory();
    else
        result = render_mapped(&set);
    keyset_free(&set);
    ascii_map = NULL;
    free(map);
    return result;
}

static PyMethodDef methods[] = {
    {"trigram_tokens", trigram_tokens, METH_O, "A long document's trigram words, separated by spaces."},
    {"install_fold_table", install_fold_table, METH_O, "Install the fold table (0x20000 native uint32 code points)."},
    {"document_tokens", document_tokens, METH_O, "The document's gram words, separated by spaces."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_grams", "Gram words of documents (optional accelerator).", -1, methods};

PyMODINIT_FUNC PyInit__grams(void) { return PyModule_Create(&module); }
