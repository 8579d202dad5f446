"""Test, lint and type-check sessions: ``nox`` runs lint, typecheck and tests."""

from __future__ import annotations

import os

import nox

# The quick checks first: a lint or type error shows in a minute, not after the tests.
nox.options.sessions = ["lint", "typecheck", "tests"]
nox.options.reuse_existing_virtualenvs = True
# Venvs made and filled by uv where it is installed (``pip install "nox[uv]"``, as .ci/run
# does): a session's installs take seconds from uv's cache instead of a minute of pip each.
# Plain virtualenv and pip otherwise. A uv venv holds no pip: the sessions whose code runs
# ``python -m pip`` install it.
nox.options.default_venv_backend = "uv|virtualenv"

PYTHON = None  # the interpreter nox itself runs on


def _bytecode(session: nox.Session) -> None:
    """Let the session's processes write the ``.pyc`` files of the modules they import.

    Under ``PYTHONDONTWRITEBYTECODE`` (set on CI's machine) no process writes them, so every
    kernel, template and command a session starts would compile its imports from source
    again (ipykernel and jupyter_client: about 0.7 s of CPU a kernel start; a launched kernel
    ready in 1.8-2.2 s against 0.55 s). The variable is dropped from the session's commands
    instead: the first process that imports a module writes its bytecode, and only what is
    imported gets compiled. Compiling the whole venv ahead (``compileall``, as before) took 65 s
    of CPU for the tests venv's 14,000 files alone, most of them never imported, and about as
    much again in every other session's venv."""
    session.env["PYTHONDONTWRITEBYTECODE"] = None


@nox.session(python=PYTHON)
def tests(session: nox.Session) -> None:
    """Unit tier (fake engine) and integration tier (real kernels), on four pytest-xdist
    workers (``-- -n 0`` for one process). Four on two CPUs: the integration tier waits
    about as long as it computes (kernels starting, servers, notebooks that sleep), and the
    workers beyond two compute meanwhile. Measured on 2026-11-29, the whole suite alone on two
    CPUs: three workers 397-429 s (4 runs), four 333 and 348 s (2 runs), the machine's CPU the
    same (590-680 s): with three, the CPUs were idle a fifth of the time. Each worker has its
    own temporary folder, so its kernels' folders never mix with another's
    (tests/conftest.py)."""
    # pip: tests/integration/test_fork_fidelity.py installs a plugin with ``python -m pip``.
    session.install("-e", ".[test]", "pip")
    _bytecode(session)
    # Collecting nothing (pytest's exit code 5) fails: a typo in -k or -m must not pass.
    # worksteal: a worker whose queue ran dry takes tests from another's, so the slow
    # integration tests at the end do not leave a worker idle while the others finish.
    given = any(arg.startswith("-n") for arg in session.posargs)
    workers = [] if given else ["-n", "4", "--dist", "worksteal"]
    # On CI, the slowest tests are listed: where the suite's time goes, run after run.
    durations = ["--durations=30"] if os.environ.get("CI") else []
    session.run("pytest", "-q", *workers, *durations, *session.posargs)


@nox.session(python=PYTHON)
def lint(session: nox.Session) -> None:
    """ruff: lint and formatting; import-linter: the layers (also run by the unit tier)."""
    session.install("ruff>=0.6", "import-linter>=2.1")
    # import-linter reads the source; it needs the package findable, not installed.
    session.run("lint-imports", "--no-cache", env={"PYTHONPATH": "src"})
    paths = ["src", "tests", "benchmarks", "noxfile.py", "docs/conf.py", "docs/_ext"]
    session.run("ruff", "check", *paths)
    session.run("ruff", "format", "--check", *paths)


@nox.session(python=PYTHON)
def typecheck(session: nox.Session) -> None:
    """mypy --strict over the package and its tests."""
    session.install("-e", ".[test]", "mypy>=1.10", "pandas-stubs", "types-PyYAML")
    session.run("mypy")


@nox.session(python=PYTHON)
def release(session: nox.Session) -> None:
    """The package as users get it (issue 29): build a wheel and an sdist, ``twine check``
    them, install the wheel in a fresh venv and run the README's example, one version
    everywhere, and the pre-commit hooks on a real repository. Run by CI, not by default.
    Its installs compile nothing ahead (``PIP_COMPILE=false``, uv's default): pip would
    compile every file of the package's dependencies at each install, where the few commands
    run after it compile what they import."""
    # pre-commit-uv: pre-commit makes the hooks' environment with uv (seconds) instead of
    # virtualenv and pip; what the hooks run is the same package, installed from this checkout.
    session.install(
        "build>=1.1", "twine>=5", "pre-commit>=3", "pre-commit-uv>=4", "pytest>=7", "uv>=0.5"
    )
    _bytecode(session)
    session.env["PIP_COMPILE"] = "false"
    session.run("pytest", "-q", "-p", "no:cacheprovider", "tests/release", *session.posargs)


@nox.session(python=PYTHON)
def docs(session: nox.Session) -> None:
    """The documentation site (issue 29): Sphinx with MyST, warnings as errors. Run by CI, not
    by default. Its examples run in the tests session, not twice: every page's snippets and
    ``{doctest}`` blocks, on real kernels, with Sphinx's doctest flags
    (tests/integration/test_docs_snippets.py, test_readme.py), and the docstrings' examples
    (tests/unit/test_docs.py). Not nitpicky: the numpydoc docstrings name types in prose
    ("str or path"), which nitpicky mode would read as references to resolve, with no
    intersphinx inventory (no network) to resolve them."""
    session.install("-e", ".[docs]")
    _bytecode(session)
    out = session.posargs[0] if session.posargs else "docs/_build"
    session.run("sphinx-build", "-b", "html", "-W", "--keep-going", "-q", "docs", f"{out}/html")


@nox.session(python=PYTHON)
def bench(session: nox.Session) -> None:
    """Speed against papermill and ploomber-engine (issues 4 and 19); not run by default."""
    session.install("-e", ".[bench]")
    _bytecode(session)
    session.run("python", "benchmarks/bench_speed.py", *session.posargs)


@nox.session(python=PYTHON)
def bench_jupyterlab(session: nox.Session) -> None:
    """The same speed benchmark in a venv that also holds JupyterLab (issue 19); not run by
    default. jupyter_server brings ``jsonschema[format-nongpl]``, which makes importing
    nbformat slower for every tool in that environment."""
    session.install("-e", ".[bench]", "jupyterlab")
    _bytecode(session)
    session.run(
        "python", "benchmarks/bench_speed.py", "--env-label", "with jupyterlab", *session.posargs
    )


@nox.session(python=PYTHON)
def bench_catalog(session: nox.Session) -> None:
    """The run catalog against scrapbook (issue 3 targets); not run by default."""
    session.install("-e", ".[bench]")
    _bytecode(session)
    session.run("python", "benchmarks/bench_catalog.py", *session.posargs)


@nox.session(python=PYTHON)
def bench_check(session: nox.Session) -> None:
    """The check gate against pytest --nbmake, and large diffs (issue 15); not run by default."""
    session.install("-e", ".[bench]")
    _bytecode(session)
    session.run("python", "benchmarks/bench_check.py", *session.posargs)


@nox.session(python=PYTHON)
def bench_pytest(session: nox.Session) -> None:
    """pytest --notebooks against --nbmake and --nbval-lax (issue 39); not run by default."""
    session.install("-e", ".[bench]")
    _bytecode(session)
    session.run("python", "benchmarks/bench_pytest.py", *session.posargs)


@nox.session(python=PYTHON)
def bench_checkpoints(session: nox.Session) -> None:
    """Durable checkpoints: ``resume`` against a papermill rerun, ``run --reuse`` against
    jupyter-cache, and what checkpoints cost in time and disk; not run by default."""
    session.install("-e", ".[bench]", "jupyter-cache")
    _bytecode(session)
    session.run("python", "benchmarks/bench_checkpoints.py", *session.posargs)


@nox.session(python=PYTHON)
def bench_papermill(session: nox.Session) -> None:
    """Papermill's own engine against the notebook_executor engine, both run by papermill."""
    session.install("-e", ".")
    _bytecode(session)
    session.run("python", "benchmarks/bench_papermill_engine.py", *session.posargs)


#: The versions of the tools we stand in for that ``peers`` compares against (issue 23).
PEERS = {"nbclient": "0.11.0", "papermill": "2.7.0", "jupytext": "1.19.6"}


@nox.session(python=PYTHON)
def peers(session: nox.Session) -> None:
    """Parity with nbclient, papermill and jupytext on their own test material, their pinned
    sdists downloaded when the session runs (issue 23); run by CI, not by default."""
    session.install(
        "-e",
        ".",
        *(f"{name}=={version}" for name, version in PEERS.items()),
        # What their tests import, and widgets for nbclient's widget notebooks.
        "pytest",
        "nbconvert",
        "testpath",
        "xmltodict",
        "ipywidgets>=8",
        # Their build backends: the sdists are downloaded without build isolation, which
        # would set up a fresh build environment for each (minutes).
        "hatchling",
        "hatch-jupyter-builder",
        "setuptools",
        "wheel",
        "pip",  # tests/sdists.py downloads the sdists with ``python -m pip download``
    )
    _bytecode(session)
    session.run("python", "tests/peers/run_peers.py", *session.posargs)


@nox.session(python=PYTHON)
def bench_dask(session: nox.Session) -> None:
    """A 40-run sweep on a two-worker LocalCluster against local runs and papermill (issue 17)."""
    session.install("-e", ".[dask]")
    _bytecode(session)
    session.run("python", "benchmarks/bench_dask.py", *session.posargs)


@nox.session(python=PYTHON)
def chaos(session: nox.Session) -> None:
    """Hosts SIGKILLed at random points of their runs (``-- --runs N --seed S``); then run files,
    catalog and processes checked (tests/chaos.py); not run by default."""
    session.install("-e", ".[test]")
    _bytecode(session)
    session.run("python", "tests/chaos.py", *session.posargs)


#: The projects whose real notebooks ``wild`` runs: their sdists are pinned in
#: tests/wild/run_wild.py; what their notebooks import is installed here, not by the package.
WILD_DEPENDENCIES = (
    "nbclient==0.11.0",
    "jupytext==1.19.6",
    "papermill==2.7.0",
    "ipywidgets>=8",
    "matplotlib",
    "numpy",
    "pandas",
    "scipy",
    "sympy",
    # The bench extra's papermill engine: it imports matplotlib.pyplot when papermill loads
    # its engines, which the corpus must survive (issue 33, item 1).
    "ploomber-engine>=0.0.30",
)


@nox.session(python=PYTHON)
def wild(session: nox.Session) -> None:
    """Real notebooks of other projects' pinned sdists (matplotlib's gallery, IPython's
    examples, nbclient's, papermill's and jupytext's notebooks) run by nbclient and by us,
    compared cell by cell, with rerun_from timed (issue 33); ``-- --sample N`` runs N of them.
    Run by CI (a sample), not by default."""
    session.install(
        "-e",
        ".",
        *WILD_DEPENDENCIES,
        # The sdists' build backends: their metadata is prepared without build isolation.
        "setuptools",
        "setuptools_scm",
        "wheel",
        "pybind11",
        "certifi",
        "hatchling",
        "hatch-jupyter-builder",
        "pip",  # tests/sdists.py downloads the sdists with ``python -m pip download``
    )
    _bytecode(session)
    session.run("python", "tests/wild/run_wild.py", *session.posargs)
