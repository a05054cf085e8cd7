/*
 * kafkafs/record/_speedups.c: the module kafkafs.record._speedups. PyInit__speedups picks
 * the CRC-32C code (_crc32c.c), imports CorruptRecordError and adds the functions of every
 * source file of the extension, one per pure-Python twin (_speedups.h lists them):
 * _fast.c (kafkafs.record.fast), _plain.c (kafkafs.record.plain), _compaction.c
 * (kafkafs.record.compaction), _columnar.c (kafkafs.record.columnar) and _jsonl.c
 * (kafkafs.record.jsonl). Here too: raise_perr and check_count, the record errors every
 * file raises with Kafka's messages (kafkafs/record/fast.py raises the same).
 */
#include "_speedups.h"
#include <stdio.h>

PyObject *CorruptRecordError = NULL;

/* Raise the error `code` (details in *e): CorruptRecordError with Kafka's message. */
void
raise_perr(int code, const perr *e)
{
    char msg[400];

    switch (code) {
    case E_PYERR:
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_SystemError, "kafkafs._speedups: error without exception");
        return;
    case E_OVERFLOW:
        PyErr_SetString(PyExc_OverflowError, "rendered size does not fit in a Py_ssize_t");
        return;
    case E_TRUNC:
        snprintf(msg, sizeof msg, "batch ends inside record %zd of %zd", e->index, e->count);
        break;
    case E_VARINT_LONG:
        snprintf(msg, sizeof msg, "varint is too long, the most significant bit in the 5th "
                 "byte is set, converted value: %llx", e->hex);
        break;
    case E_VARLONG_LONG:
        snprintf(msg, sizeof msg, "varlong is too long, the most significant bit in the 10th "
                 "byte is set, converted value: %llx", e->hex);
        break;
    case E_LEN_NEG:
        snprintf(msg, sizeof msg, "invalid record size: negative record length %lld", e->a);
        break;
    case E_LEN_BIG:
        snprintf(msg, sizeof msg, "invalid record size: expected %lld bytes in record payload, "
                 "but instead the buffer has only %lld remaining bytes", e->a, e->b);
        break;
    case E_KEY_NEG:
        snprintf(msg, sizeof msg, "invalid negative key size %lld", e->a);
        break;
    case E_VAL_NEG:
        snprintf(msg, sizeof msg, "invalid negative value size %lld", e->a);
        break;
    case E_HCOUNT_NEG:
        snprintf(msg, sizeof msg, "found invalid number of record headers %lld", e->a);
        break;
    case E_HCOUNT_BIG:
        snprintf(msg, sizeof msg, "found invalid number of record headers. The number of "
                 "record headers is larger than the remaining size of the buffer, "
                 "numHeaders: %lld", e->a);
        break;
    case E_HKEY_NEG:
        snprintf(msg, sizeof msg, "invalid negative header key size %lld", e->a);
        break;
    case E_HVAL_NEG:
        snprintf(msg, sizeof msg, "invalid negative header value size %lld", e->a);
        break;
    case E_HKEY_UTF8:
        snprintf(msg, sizeof msg, "header key is not valid UTF-8");
        break;
    case E_BODY:
        snprintf(msg, sizeof msg, "invalid record size: expected to read %lld bytes in record "
                 "payload, but instead read %lld", e->a, e->b);
        break;
    case E_LEFTOVER:
        snprintf(msg, sizeof msg, "incorrect declared batch size, records still remaining "
                 "(%lld bytes left after %zd records)", e->a, e->count);
        break;
    case E_COUNT_NEG:
        snprintf(msg, sizeof msg, "found invalid record count %lld in magic v2 batch", e->a);
        break;
    default:
        PyErr_SetString(PyExc_SystemError, "kafkafs._speedups: internal error");
        return;
    }
    PyErr_SetString(CorruptRecordError, msg);
}

/* Note the expected record count in *e; -1 with CorruptRecordError when it is negative. */
int
check_count(Py_ssize_t count, perr *e)
{
    e->count = count;
    if (count < 0) {
        e->a = count;
        raise_perr(E_COUNT_NEG, e);
        return -1;
    }
    return 0;
}

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    "kafkafs.record._speedups",
    "C versions of the record hot paths; use kafkafs.record.fast, which falls back to\n"
    "pure Python when this module is missing.",
    -1,
    NULL,  /* every source file adds its own functions (PyInit__speedups) */
};

PyMODINIT_FUNC
PyInit__speedups(void)
{
    PyObject *m, *errors;

    kk_crc32c_init();
    errors = PyImport_ImportModule("kafkafs.record.errors");
    if (errors == NULL)
        return NULL;
    Py_XDECREF(CorruptRecordError);
    CorruptRecordError = PyObject_GetAttrString(errors, "CorruptRecordError");
    Py_DECREF(errors);
    if (CorruptRecordError == NULL)
        return NULL;
    m = PyModule_Create(&module);
    if (m == NULL)
        return NULL;
    /* in the order the module's names were always added */
    if (fast_add_functions(m) < 0 || plain_add_functions(m) < 0 || cl_add_functions(m) < 0 ||
            cb_add_type(m) < 0 || jsonl_add_functions(m) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    Py_INCREF(CorruptRecordError);
    if (PyModule_AddObject(m, "CorruptRecordError", CorruptRecordError) < 0) {
        Py_DECREF(CorruptRecordError);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
