"""Durable checkpoints, kernel side: the notebook's state written to files, and read back.

Loaded by path in the kernel (``kernel_main.sibling("state_files")``) when the host first asks;
standard library only, nothing from ``notebook_executor``. The host asks with a shell message
of its own (``kernel_main.STATE_REQUEST``), handled between two messages on the kernel's main
thread: no cell runs, the execution count does not move.

``{"op": "save", "objects": folder, "forms": [hex, ...]}``
    Writes what a fresh kernel needs to be in this state, and replies with the manifest:

    - each variable of the user namespace (IPython's own names aside), pickled (protocol 5).
      Variables that share an object (``b = a``; a list holding a dict another name holds) are
      pickled together, so that they still share it once read back. A closed file (``with
      open(...) as f``) is kept as closed, with its name and mode. Each pickle is written to
      ``objects/<sha256>.pkl`` unless that file is there: only what changed is written.
      Functions defined in the notebook are kept as their code (``marshal``), their globals
      being the namespace they are read back into. A module is kept as its name.
    - what a variable does not keep is named with the reason (``unkept``): objects that do not
      pickle (open files, generators, locks, sockets, threads, connections), classes defined
      in the notebook and their instances, a module's own mutable object (``from helper
      import CONFIG``: its copy would not be the module's), and any pickle holding one of
      ``forms`` (the byte forms of the run's secrets: no secret is written).
    - the working folder, ``sys.path``, the environment variables the notebook changed, the
      ``random`` and numpy's global generators' states, and the execution count.
    - what the cells read so far: the files (the audit hook's, with their sha256 now; the
      sources of the modules imported from outside the interpreter's folders too, even when
      read from their ``.pyc``; not the checkpoints' own files) and the environment variables
      (their sha256; the value of a secret is not hashed: ``forms``).
    - the environment (:func:`environment`): a checkpoint is read back only where it is the same.

``{"op": "load", "objects": folder, "manifest": {...}}``
    Reads a manifest's state into this (fresh) kernel: replies ``{"status": "ok"}``, or an
    error naming why (another environment, a file missing); the kernel is then not used.

``{"op": "environment"}``
    Replies ``{"environment": ...}``.
"""

from __future__ import annotations

# Runs in the kernel, on every checkpoint: os.path, no pathlib.
# ruff: noqa: PTH100, PTH103, PTH105, PTH109, PTH110, PTH112, PTH116, PTH118, PTH120, PTH123, PTH208
import hashlib
import io
import marshal
import os
import pickle
import sys
import types
from typing import Any

#: The shell message that asks, and its reply (as in ``kernel_main``).
STATE_REQUEST = "nbx_state_request"
STATE_REPLY = "nbx_state_reply"

#: Names IPython keeps in the namespace for itself (its output and input history, helpers).
_IPYTHON_NAMES = frozenset(
    {"In", "Out", "exit", "quit", "get_ipython", "_", "__", "___", "_i", "_ii", "_iii"}
    | {"_ih", "_oh", "_dh", "__name__", "__doc__", "__package__", "__loader__", "__spec__"}
    | {"__builtin__", "__builtins__", "__file__", "__cached__", "__annotations__"}
)

#: Objects whose sharing between variables matters, and objects pickled by name.
_SHARED = (list, dict, set, bytearray, types.FunctionType)
_NAMED = (type, types.ModuleType, types.BuiltinFunctionType, types.FunctionType)

#: The buffered files kept when closed (:func:`_closed_file`), as text and raw files are.
_BUFFERED = (io.BufferedReader, io.BufferedWriter, io.BufferedRandom)

#: The modules of figures and their artists, which are not pickled.
_DRAWN = ("matplotlib.", "mpl_toolkits.")

#: Longest file hashed whole; a larger one is known by size and time of change.
_HASH_BYTES = 1 << 30

#: The environment as the kernel started (the environment variables a notebook changed are
#: those that differ from it).
_STARTED_ENV: dict[str, str] | None = None
#: ``sys.path`` as the kernel started (the folders a notebook adds are part of its state).
_STARTED_PATH: list[str] | None = None
_FILE_HASHES: dict[tuple[str, int, int], str] = {}
_ENV_READ: set[str] = set()
#: Whether a cell is running now (IPython's execute events).
_IN_CELL = [False]


class Unkept(Exception):
    """A variable that cannot be written; the message says why."""


def install() -> None:
    """Note the environment as the kernel starts, and which variables the notebook's cells
    read (while a cell runs: not the kernel's own reads)."""
    global _STARTED_ENV, _STARTED_PATH
    _STARTED_ENV = dict(os.environ)
    _STARTED_PATH = list(sys.path)
    _ENV_READ.clear()
    shell = _shell()
    if shell is not None:
        shell.events.register("pre_execute", lambda: _IN_CELL.__setitem__(0, True))
        shell.events.register("post_execute", lambda: _IN_CELL.__setitem__(0, False))
    environ = os.environ
    base = type(environ)
    if getattr(base, "_nbx_tracking", False):
        return

    class TrackedEnviron(base):  # type: ignore[misc, valid-type]
        _nbx_tracking = True

        def __getitem__(self, key: Any) -> Any:
            if _IN_CELL[0] and isinstance(key, str):
                _ENV_READ.add(key)
            return base.__getitem__(self, key)

        def __contains__(self, key: Any) -> bool:
            if _IN_CELL[0] and isinstance(key, str):
                _ENV_READ.add(key)
            return bool(base.__contains__(self, key))

    try:
        environ.__class__ = TrackedEnviron
    except TypeError:
        return


def handle(content: dict[str, Any]) -> dict[str, Any]:
    """Answer one request (see the module doc)."""
    op = content.get("op")
    if op == "save":
        forms = [bytes.fromhex(f) for f in content.get("forms", [])]
        return save(str(content["objects"]), forms, content.get("limit"))
    if op == "load":
        return load(str(content["objects"]), content["manifest"])
    if op == "environment":
        names = [str(name) for name in content.get("names", [])]
        forms = [bytes.fromhex(f) for f in content.get("forms", [])]
        return {"status": "ok", "environment": environment(), "env": _env_digests(names, forms)}
    return {"status": "error", "evalue": f"unknown op {op!r}"}


def environment() -> dict[str, Any]:
    """What a checkpoint is only read back into: this interpreter, and the packages it finds
    (the names of the distributions in the folders of ``sys.path`` as the kernel started,
    versions included: a folder the notebook adds is part of its state, and the modules it
    imports from there are among the files its cells read)."""
    found: list[str] = []
    for entry in sys.path if _STARTED_PATH is None else _STARTED_PATH:
        if not entry or not os.path.isdir(entry):
            continue
        try:
            names = os.listdir(entry)
        except OSError:
            continue
        found.extend(
            f"{entry}/{name}" for name in names if name.endswith((".dist-info", ".egg-info"))
        )
    packages = hashlib.sha256("\n".join(sorted(found)).encode()).hexdigest()
    return {"python": sys.version, "executable": sys.executable, "packages": packages}


def _shell() -> Any:
    from IPython import get_ipython

    return get_ipython()


def _user_names(shell: Any) -> dict[str, Any]:
    hidden = shell.user_ns_hidden
    names = {}
    for name, value in shell.user_ns.items():
        if name in _IPYTHON_NAMES or (name in hidden and hidden[name] is value):
            continue
        if name.startswith("_") and (name[1:].isdigit() or name[2:].isdigit()):
            continue  # _12, _i12: the output and input history
        names[name] = value
    return names


# -- saving ------------------------------------------------------------------------------


def _closed_file(name: Any, mode: str, kind: str) -> Any:
    """A closed file of the notebook (``with open(...) as f``), made again: closed, of the
    same type, with its name and mode."""
    opened = mode.replace("x", "w").replace("U", "")
    if kind == "raw":
        made: Any = io.FileIO(os.devnull, opened)
    else:
        made = open(os.devnull, opened)  # noqa: SIM115 (closed below)
    raw = made.buffer.raw if kind == "text" else getattr(made, "raw", made)
    raw.name = name
    if kind == "text":
        made.mode = mode
    made.close()
    return made


def _closed_file_reduction(obj: Any) -> Any:
    """How to make closed file ``obj`` again (None: it is not a plain closed file)."""
    kinds: dict[type, str] = {io.TextIOWrapper: "text", io.FileIO: "raw"}
    kind = kinds.get(type(obj), "buffered")
    if not (kind != "buffered" or type(obj) in _BUFFERED) or not obj.closed:
        return None
    try:
        raw = obj.buffer.raw if kind == "text" else getattr(obj, "raw", obj)
        if type(raw) is not io.FileIO:
            return None
        return (_closed_file, (raw.name, str(obj.mode), kind))
    except Exception:
        return None


def _rebuild_function(
    code: bytes,
    name: str,
    qualname: str,
    defaults: Any,
    kwdefaults: Any,
    closure: Any,
    attributes: dict[str, Any],
) -> Any:
    """A function of the notebook, made again in the namespace it is read back into."""
    cells = None if closure is None else tuple(types.CellType(value) for value in closure)
    function = types.FunctionType(marshal.loads(code), _shell().user_ns, name, defaults, cells)
    function.__qualname__ = qualname
    function.__kwdefaults__ = kwdefaults
    function.__dict__.update(attributes)
    return function


class _Pickler(pickle.Pickler):
    """Functions of the notebook as code; classes of the notebook refused; the objects seen
    noted (to find the variables that share one)."""

    def __init__(self, file: Any, user_ns: dict[str, Any], seen: set[int]) -> None:
        super().__init__(file, protocol=5)
        self.user_ns = user_ns
        self.seen = seen

    def persistent_id(self, obj: Any) -> None:
        # The objects two variables may share: containers, functions, instances, arrays (not
        # types, modules or builtins, which every pickle names alike).
        kind = type(obj)
        if kind is types.FunctionType:
            # The notebook's functions (a library's, numpy's ``_frombuffer`` in every array's
            # pickle, are pickled by name: sharing them shares nothing).
            if obj.__globals__ is self.user_ns:
                self.seen.add(id(obj))
        elif (
            kind in _SHARED
            or kind.__name__ == "ndarray"
            or (hasattr(obj, "__dict__") and not isinstance(obj, _NAMED))
        ):
            self.seen.add(id(obj))
        return None

    def reducer_override(self, obj: Any) -> Any:
        if isinstance(obj, types.FunctionType) and obj.__globals__ is self.user_ns:
            closure = None
            if obj.__closure__ is not None:
                try:
                    closure = tuple(cell.cell_contents for cell in obj.__closure__)
                except ValueError:
                    raise Unkept("a function whose closure is not filled yet") from None
            return (
                _rebuild_function,
                (
                    marshal.dumps(obj.__code__),
                    obj.__name__,
                    obj.__qualname__,
                    obj.__defaults__,
                    obj.__kwdefaults__,
                    closure,
                    dict(obj.__dict__),
                ),
            )
        if isinstance(obj, io.IOBase):
            closed = _closed_file_reduction(obj)
            if closed is not None:
                return closed
        if isinstance(obj, type):
            if obj.__module__ == "__main__":
                raise Unkept(f"the class {obj.__qualname__} is defined in the notebook")
            return NotImplemented
        cls = type(obj)
        if getattr(cls, "__module__", None) == "__main__":
            raise Unkept(f"an instance of {cls.__qualname__}, a class defined in the notebook")
        if str(getattr(cls, "__module__", "")).startswith(_DRAWN) and hasattr(obj, "draw"):
            # Pickling a figure costs more than drawing it (0.3 s for a legend's, measured):
            # its cells draw it again.
            raise Unkept(f"a matplotlib {cls.__name__} (its cells draw it again)")
        module = getattr(obj, "__module__", None)
        if module == "__main__" and not isinstance(obj, types.FunctionType):
            raise Unkept(f"a {cls.__name__} of the notebook")
        if isinstance(obj, types.FunctionType) and obj.__module__ == "__main__":
            raise Unkept("a function of another namespace of the notebook")
        return NotImplemented


def _pickle(value: Any, user_ns: dict[str, Any]) -> tuple[bytes, set[int]]:
    seen: set[int] = set()
    buffer = io.BytesIO()
    try:
        _Pickler(buffer, user_ns, seen).dump(value)
    except Unkept:
        raise
    except RecursionError:
        raise Unkept("nested too deeply to pickle") from None
    except Exception as exc:
        raise Unkept(f"{type(value).__name__} does not pickle ({type(exc).__name__})") from None
    return buffer.getvalue(), seen


def _write(objects: str, data: bytes) -> str:
    digest = hashlib.sha256(data).hexdigest()
    path = os.path.join(objects, f"{digest}.pkl")
    if not os.path.exists(path):
        temporary = f"{path}.{os.getpid()}.tmp"
        with open(temporary, "wb") as out:
            out.write(data)
        os.replace(temporary, path)
    return digest


def _audit() -> Any:
    """The file audit of this kernel (``file_audit.py``), None without one."""
    return getattr(sys.modules.get("_notebook_executor_file_audit"), "AUDIT", None)


def _not_audited(objects: str) -> None:
    """Leave the checkpoints' own files out of the files the notebook read and wrote (they
    would count as its outputs, and towards the audit's limit)."""
    audit = _audit()
    folder = os.path.join(os.path.dirname(os.path.abspath(objects)), "")
    if audit is not None and folder not in audit.ignored:
        audit.ignored = (*audit.ignored, folder)


def _secret_in(data: bytes, forms: list[bytes]) -> bool:
    return any(form in data for form in forms)


def _estimated_bytes(value: Any) -> int:
    """What an array or a frame holds, without pickling it (0 when unknown)."""
    try:
        nbytes = getattr(value, "nbytes", None)
        if isinstance(nbytes, int):
            return nbytes
        usage = getattr(value, "memory_usage", None)
        if callable(usage) and type(value).__name__ == "DataFrame":
            return int(usage(deep=False).sum())
    except Exception:
        return 0
    return 0


def save(objects: str, forms: list[bytes], limit: int | None = None) -> dict[str, Any]:
    """Write the state; the manifest (see the module doc). A variable over ``limit`` bytes
    (an array's or a frame's size, known before pickling) is not kept."""
    shell = _shell()
    user_ns = shell.user_ns
    os.makedirs(objects, exist_ok=True)
    _not_audited(objects)
    modules: dict[str, str] = {}
    unkept: dict[str, str] = {}
    pickles: dict[str, tuple[bytes, set[int]]] = {}
    budget = int(limit) if limit else None
    for name, value in _user_names(shell).items():
        size = _estimated_bytes(value)
        if budget is not None and size > budget:
            unkept[name] = f"too large to keep ({size:,} bytes, over {budget:,})"
            continue
        if isinstance(value, types.ModuleType):
            if sys.modules.get(value.__name__) is value:
                modules[name] = value.__name__
            else:
                unkept[name] = "a module not imported by name"
            continue
        try:
            pickles[name] = _pickle(value, user_ns)
        except Unkept as why:
            unkept[name] = str(why)
            continue
        base = getattr(value, "base", None)
        if type(value).__name__ == "ndarray" and base is not None:
            while getattr(base, "base", None) is not None:
                base = base.base
            # A view of another variable's array would be a copy once read back.
            pickles[name][1].add(id(base))
    views = _views(pickles, user_ns)
    for name in views:
        unkept[name] = "a view of another variable's array"
        del pickles[name]
    for name, where in _module_objects({n: user_ns[n] for n in pickles}, shell).items():
        unkept[name] = f"it is {where}: read back, it would be a copy, no longer the module's"
        del pickles[name]
    groups = _groups(pickles)
    variables: dict[str, str] = {}
    sizes: dict[str, int] = {}
    written = 0
    for group in groups:
        if len(group) == 1:
            data = pickles[group[0]][0]
        else:
            try:
                data = _pickle({name: user_ns[name] for name in group}, user_ns)[0]
            except Unkept as why:
                unkept.update(dict.fromkeys(group, str(why)))
                continue
        if _secret_in(data, forms):
            unkept.update(dict.fromkeys(group, "holds the value of a secret"))
            continue
        existed = os.path.exists(os.path.join(objects, hashlib.sha256(data).hexdigest() + ".pkl"))
        digest = _write(objects, data)
        written += 0 if existed else len(data)
        sizes[digest] = len(data)
        for name in group:
            variables[name] = digest if len(group) == 1 else f"{digest}#{name}"
    extras, extras_unkept = _process_state(objects, forms)
    unkept.update(extras_unkept)
    return {
        "status": "ok",
        "variables": variables,
        "modules": modules,
        "unkept": unkept,
        "sizes": sizes,
        "written": written,
        "process": extras,
        "execution_count": shell.execution_count,
        "reads": _reads(forms),
        "environment": environment(),
    }


def _module_objects(values: dict[str, Any], shell: Any) -> dict[str, str]:
    """The variables that hold a module's own mutable object (``from helper import CONFIG``,
    ``from matplotlib import rcParams``): a pickle copies it, and the module read back would
    not see the copy, nor the changes made through it. Named by the module's name for it.
    The modules looked in are those the notebook names: its modules' names, and those its
    cells import from (``from m import ...``)."""
    wanted: dict[int, str] = {}
    for name, value in values.items():
        kind = type(value)
        copied = isinstance(value, (list, dict, set, bytearray)) or (
            hasattr(value, "__dict__")
            and not isinstance(value, _NAMED)
            and getattr(kind, "__reduce_ex__", None) is object.__reduce_ex__
            and getattr(kind, "__reduce__", None) is object.__reduce__
        )
        if copied:
            wanted[id(value)] = name
    found: dict[str, str] = {}
    if not wanted:
        return found
    named = {
        value.__name__
        for value in shell.user_ns.values()
        if isinstance(value, types.ModuleType) and isinstance(value.__name__, str)
    }
    for source in shell.user_ns.get("_ih", []) or []:
        named.update(_imported_from(source))
    for module_name in sorted(named):
        module = sys.modules.get(module_name)
        attributes = getattr(module, "__dict__", None)
        if not isinstance(attributes, dict) or attributes is shell.user_ns:
            continue
        for attribute, value in list(attributes.items()):
            held = wanted.get(id(value))
            if held is not None and value is values[held] and held not in found:
                found[held] = f"{module_name}.{attribute}"
    return found


_IMPORTED_FROM: dict[str, frozenset[str]] = {}


def _imported_from(source: Any) -> frozenset[str]:
    """The modules a cell's source imports names from (``from m import n``), once per text."""
    if not isinstance(source, str):
        return frozenset()
    known = _IMPORTED_FROM.get(source)
    if known is None:
        import ast

        try:
            nodes = list(ast.walk(ast.parse(source)))
        except (SyntaxError, ValueError):
            nodes = []
        known = frozenset(
            node.module
            for node in nodes
            if isinstance(node, ast.ImportFrom) and node.module and not node.level
        )
        _IMPORTED_FROM[source] = known
    return known


def _views(pickles: dict[str, tuple[bytes, set[int]]], user_ns: dict[str, Any]) -> list[str]:
    """The variables that are numpy views of an array another variable holds."""
    holders = {id(user_ns[name]): name for name in pickles}
    views = []
    for name in pickles:
        value = user_ns[name]
        base = getattr(value, "base", None)
        if type(value).__name__ != "ndarray" or base is None:
            continue
        while getattr(base, "base", None) is not None:
            base = base.base
        if holders.get(id(base), name) != name or any(
            id(base) in seen for other, (_, seen) in pickles.items() if other != name
        ):
            views.append(name)
    return views


def _groups(pickles: dict[str, tuple[bytes, set[int]]]) -> list[list[str]]:
    """The variables that share an object, together (union by the objects each pickle saw)."""
    owner: dict[int, str] = {}
    parent = {name: name for name in pickles}

    def root(name: str) -> str:
        while parent[name] != name:
            parent[name] = parent[parent[name]]
            name = parent[name]
        return name

    for name, (_, seen) in pickles.items():
        for ident in seen:
            other = owner.setdefault(ident, name)
            if other != name:
                parent[root(name)] = root(other)
    groups: dict[str, list[str]] = {}
    for name in pickles:
        groups.setdefault(root(name), []).append(name)
    return list(groups.values())


def _process_state(objects: str, forms: list[bytes]) -> tuple[dict[str, Any], dict[str, str]]:
    """The working folder, ``sys.path``, the environment's changes, the global generators."""
    unkept: dict[str, str] = {}
    started = _STARTED_ENV or {}
    changed = {k: v for k, v in os.environ.items() if started.get(k) != v}
    removed = sorted(k for k in started if k not in os.environ)
    state: dict[str, Any] = {"cwd": os.getcwd(), "sys_path": list(sys.path)}
    generators: dict[str, Any] = {}
    import random

    generators["random"] = random.getstate()
    numpy = sys.modules.get("numpy")
    if numpy is not None:
        try:
            generators["numpy"] = numpy.random.get_state()
        except Exception:
            unkept["numpy.random"] = "numpy's global generator could not be read"
    data = pickle.dumps(
        {"environ": changed, "removed": removed, "generators": generators}, protocol=5
    )
    if _secret_in(data, forms):
        unkept["os.environ"] = "an environment variable the notebook set holds a secret"
    else:
        state["blob"] = _write(objects, data)
    return state, unkept


def _file_hash(path: str) -> str | None:
    try:
        stat = os.stat(path)
    except OSError:
        return None
    key = (path, stat.st_size, stat.st_mtime_ns)
    known = _FILE_HASHES.get(key)
    if known is not None:
        return known
    if stat.st_size > _HASH_BYTES:
        digest = f"size:{stat.st_size}:mtime:{stat.st_mtime_ns}"
    else:
        sha = hashlib.sha256()
        try:
            with open(path, "rb") as source:
                for block in iter(lambda: source.read(1 << 20), b""):
                    sha.update(block)
        except OSError:
            return None
        digest = sha.hexdigest()
    _FILE_HASHES[key] = digest
    return digest


def _reads(forms: list[bytes]) -> dict[str, Any]:
    """The files the cells opened so far (hashed now) and the environment variables they read."""
    audit = _audit()
    files: dict[str, Any] = {}
    complete = audit is not None and audit.dropped == 0
    if audit is not None:
        for path, access in audit.seen.items():
            files[path] = [access, _file_hash(path)]
        for path in _module_files(audit.ignored):
            if path not in files:
                files[path] = ["r", _file_hash(path)]
    return {"files": files, "env": _env_digests(sorted(_ENV_READ), forms), "complete": complete}


#: ``_module_files``' last answer, and the modules it was for (by count: they only grow).
_MODULE_FILES: list[Any] = [-1, None, []]


def _module_files(ignored: tuple[str, ...]) -> list[str]:
    """The files of the modules imported from outside the interpreter's and the kernel's own
    folders (the notebook's modules): an import from an up-to-date ``__pycache__`` reads the
    ``.pyc`` (which the audit leaves out), not the source, yet the source is what it stands
    for."""
    modules = list(sys.modules.values())
    if _MODULE_FILES[0] == len(modules) and _MODULE_FILES[1] == ignored:
        return list(_MODULE_FILES[2])
    found = []
    for module in modules:
        path = getattr(module, "__file__", None)
        if not isinstance(path, str):
            continue
        if not path.startswith("/"):
            path = os.path.abspath(path)
        if not path.startswith(ignored) and "/__pycache__/" not in path:
            found.append(path)
    _MODULE_FILES[:] = [len(modules), ignored, found]
    return list(found)


def _env_digests(names: list[str], forms: list[bytes]) -> dict[str, str | None]:
    """The sha256 of each variable's value as the kernel started (the notebook's own changes
    are part of the state); None when unset, ``"secret"`` for a secret's value."""
    started = _STARTED_ENV if _STARTED_ENV is not None else dict(os.environ)
    digests: dict[str, str | None] = {}
    for name in names:
        value = started.get(name)
        if value is None:
            digests[name] = None
        elif _secret_in(value.encode("utf-8", "surrogatepass"), forms):
            digests[name] = "secret"
        else:
            digests[name] = hashlib.sha256(value.encode("utf-8", "surrogatepass")).hexdigest()
    return digests


# -- loading ------------------------------------------------------------------------------


def load(objects: str, manifest: dict[str, Any]) -> dict[str, Any]:
    """Read ``manifest``'s state into this (fresh) kernel (see the module doc). Everything is
    read and checked before anything changes: ``"touched": false`` in an error says the
    kernel is as it was."""

    _not_audited(objects)
    if manifest.get("environment") != environment():
        return _refused("the checkpoint was written in another environment")
    process = manifest.get("process") or {}
    if not os.path.isdir(str(process.get("cwd", ""))):
        return _refused("its working folder is gone")
    data: dict[str, bytes] = {}
    try:
        for reference in [process["blob"], *manifest.get("variables", {}).values()]:
            digest = str(reference).partition("#")[0]
            if digest not in data:
                data[digest] = _read(objects, digest)
    except (OSError, KeyError) as exc:
        return _refused(f"a file of the checkpoint is missing or damaged ({exc})")
    shell = _shell()
    try:
        # As in a cell: a module imported here decides its settings as it would in one
        # (pandas' display.max_columns is 20 only where builtins' get_ipython is the shell's).
        with shell.builtin_trap:
            _apply(shell, process, manifest, data)
    except Exception as exc:
        return {"status": "error", "evalue": f"{type(exc).__name__}: {exc!s:.300}", "touched": True}
    return {"status": "ok"}


def _apply(
    shell: Any, process: dict[str, Any], manifest: dict[str, Any], data: dict[str, bytes]
) -> None:
    """Make the state ``manifest``'s in ``shell`` (``data``: its objects, read and checked)."""
    import importlib

    user_ns = shell.user_ns
    os.chdir(process["cwd"])
    sys.path[:] = list(process.get("sys_path", sys.path))
    extras = pickle.loads(data[process["blob"]])
    for name in extras["removed"]:
        os.environ.pop(name, None)
    os.environ.update(extras["environ"])
    for name, module in manifest.get("modules", {}).items():
        user_ns[name] = importlib.import_module(module)
    loaded: dict[str, Any] = {}
    for name, reference in manifest.get("variables", {}).items():
        digest, _, member = reference.partition("#")
        if digest not in loaded:
            loaded[digest] = pickle.loads(data[digest])
        user_ns[name] = loaded[digest][member] if member else loaded[digest]
    import random

    random.setstate(extras["generators"]["random"])
    if "numpy" in extras["generators"]:
        import numpy

        numpy.random.set_state(extras["generators"]["numpy"])
    shell.execution_count = int(manifest.get("execution_count", shell.execution_count))


def _refused(why: str) -> dict[str, Any]:
    return {"status": "error", "evalue": why, "touched": False}


def _read(objects: str, digest: str) -> bytes:
    with open(os.path.join(objects, f"{digest}.pkl"), "rb") as source:
        data = source.read()
    if hashlib.sha256(data).hexdigest() != digest:
        raise OSError(f"{digest}.pkl does not hold what it was written with")
    return data
