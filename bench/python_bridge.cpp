// bench/python_bridge.cpp — see python_bridge.h.
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "python_bridge.h"

#include <ATen/DLConvertor.h>

#include <stdexcept>

namespace pt2rt::bench {
namespace {

/// The pending Python exception as text (traceback.format_exception), cleared.
std::string python_error() {
  PyObject *type = nullptr, *value = nullptr, *tb = nullptr;
  PyErr_Fetch(&type, &value, &tb);
  PyErr_NormalizeException(&type, &value, &tb);
  std::string text = "Python error";
  if (PyObject* mod = PyImport_ImportModule("traceback")) {
    PyObject* lines = PyObject_CallMethod(mod, "format_exception", "OOO", type ? type : Py_None,
                                          value ? value : Py_None, tb ? tb : Py_None);
    if (lines) {
      PyObject* sep = PyUnicode_FromString("");
      PyObject* joined = PyUnicode_Join(sep, lines);
      if (joined) text = PyUnicode_AsUTF8(joined);
      Py_XDECREF(joined);
      Py_XDECREF(sep);
      Py_DECREF(lines);
    }
    Py_DECREF(mod);
  }
  PyErr_Clear();
  Py_XDECREF(type);
  Py_XDECREF(value);
  Py_XDECREF(tb);
  return text;
}

PyObject* check(PyObject* o) {
  if (!o) throw std::runtime_error(python_error());
  return o;
}

/// Holds the GIL for its scope (PyGILState_Ensure / Release).
struct Gil {
  Gil() : state(PyGILState_Ensure()) {}
  ~Gil() { PyGILState_Release(state); }
  PyGILState_STATE state;
};

PyThreadState* g_main_thread = nullptr;

/// module.<fn>(*string_args): a new reference. The GIL must be held.
/// @throws std::runtime_error with the Python traceback text.
PyObject* call_with_strings(PyObject* module, const std::string& fn,
                            const std::vector<std::string>& args) {
  PyObject* f = check(PyObject_GetAttrString(module, fn.c_str()));
  PyObject* tuple = PyTuple_New(static_cast<Py_ssize_t>(args.size()));
  for (size_t i = 0; i < args.size(); ++i) {
    PyTuple_SET_ITEM(tuple, i, PyUnicode_FromString(args[i].c_str()));
  }
  PyObject* result = PyObject_CallObject(f, tuple);
  Py_DECREF(tuple);
  Py_DECREF(f);
  return check(result);
}

}  // namespace

Python::Python(const std::string& bench_dir, const std::string& module) {
  Py_InitializeEx(0);  // no signal handlers: Ctrl-C stays with the C++ program
  PyObject* sys_path = check(PySys_GetObject("path"));  // borrowed
  PyObject* dir = check(PyUnicode_FromString(bench_dir.c_str()));
  PyList_Insert(sys_path, 0, dir);
  Py_DECREF(dir);
  module_ = check(PyImport_ImportModule(module.c_str()));
  // Release the GIL: LibTorch's autograd engine refuses to run while a thread holds it
  // (C++ contenders call backward()); every call into Python below takes it back.
  g_main_thread = PyEval_SaveThread();
}

Python::~Python() {
  PyEval_RestoreThread(g_main_thread);
  for (void* o : keep_) Py_XDECREF(static_cast<PyObject*>(o));
  Py_XDECREF(static_cast<PyObject*>(module_));
  // The interpreter is not finalized: torch's atexit handlers and the process exit do it.
}

std::string Python::call_str(const std::string& fn, const std::vector<std::string>& args) {
  Gil gil;
  PyObject* result = call_with_strings(static_cast<PyObject*>(module_), fn, args);
  const char* s = PyUnicode_AsUTF8(result);
  std::string out = s ? s : "";
  Py_DECREF(result);
  if (!s) throw std::runtime_error(python_error());
  return out;
}

void Python::Callable::operator()() const {
  Gil gil;
  PyObject* r = PyObject_CallObject(static_cast<PyObject*>(fn_), nullptr);
  if (!r) throw std::runtime_error(python_error());
  Py_DECREF(r);
}

std::vector<at::Tensor> Python::Callable::tensors() const {
  Gil gil;
  PyObject* r = PyObject_CallObject(static_cast<PyObject*>(fn_), nullptr);
  if (!r) throw std::runtime_error(python_error());
  PyObject* seq = PySequence_Fast(r, "expected a list or tuple of tensors");
  Py_DECREF(r);
  check(seq);
  PyObject* dlpack = PyImport_ImportModule("torch.utils.dlpack");
  if (!dlpack) {
    Py_DECREF(seq);
    throw std::runtime_error(python_error());
  }
  std::vector<at::Tensor> out;
  std::string error;
  for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(seq) && error.empty(); ++i) {
    PyObject* capsule = PyObject_CallMethod(dlpack, "to_dlpack", "O",
                                            PySequence_Fast_GET_ITEM(seq, i));  // borrowed item
    if (!capsule) {
      error = python_error();
      break;
    }
    auto* managed = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(capsule, "dltensor"));
    if (managed) {
      out.push_back(at::fromDLPack(managed));  // owns `managed` now: its deleter runs on free
      PyCapsule_SetName(capsule, "used_dltensor");  // DLPack's protocol: consumed
    } else {
      error = python_error();
    }
    Py_DECREF(capsule);
  }
  Py_DECREF(dlpack);
  Py_DECREF(seq);
  if (!error.empty()) throw std::runtime_error(error);
  return out;
}

std::pair<Python::Callable, Python::Callable> Python::eager_runner(const std::string& name,
                                                                  bool set_to_none) {
  Gil gil;
  PyObject* runner = check(PyObject_CallMethod(static_cast<PyObject*>(module_), "runner", "si",
                                               name.c_str(), set_to_none ? 1 : 0));
  PyObject* infer = check(PyObject_GetAttrString(runner, "infer"));
  PyObject* step = check(PyObject_GetAttrString(runner, "train_step"));
  keep_.push_back(runner);
  keep_.push_back(infer);
  keep_.push_back(step);
  return {Callable(infer), Callable(step)};
}

std::vector<Python::Callable> Python::methods(const std::string& factory,
                                              const std::vector<std::string>& args,
                                              const std::vector<std::string>& names) {
  Gil gil;
  PyObject* object = call_with_strings(static_cast<PyObject*>(module_), factory, args);
  keep_.push_back(object);
  std::vector<Callable> out;
  for (const std::string& name : names) {
    PyObject* m = check(PyObject_GetAttrString(object, name.c_str()));
    keep_.push_back(m);
    out.emplace_back(m);
  }
  return out;
}

void Python::set_num_threads(int n) {
  Gil gil;
  PyObject* torch = check(PyImport_ImportModule("torch"));
  PyObject* r = PyObject_CallMethod(torch, "set_num_threads", "i", n);
  Py_DECREF(torch);
  Py_DECREF(check(r));
}

}  // namespace pt2rt::bench
