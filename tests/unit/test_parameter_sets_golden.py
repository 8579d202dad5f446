"""The parameter-sets file of ``check`` and ``pytest --notebooks``, and output regression's
normalisation, diffs and golden files (no kernel: the runs are in the integration tier)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import nbformat
import pytest

from notebook_executor import InvalidArgumentError
from notebook_executor._review.check import CheckCase, CheckResult, check_cases, junit_xml
from notebook_executor._review.golden import (
    OutputRules,
    comparable,
    golden_path,
    load_rules,
    readable_diff,
    store_outputs,
    stored_outputs,
)
from notebook_executor._review.parameter_sets import DEFAULT_SET, load_parameter_sets


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def test_parameter_sets_one_set_several_sets_globs_and_defaults(tmp_path: Path) -> None:
    sets_file = _write(
        tmp_path / "ci" / "sets.yaml",
        "logbook.md:\n  station: north-3\n"
        "frames.py:\n  - id: small\n    parameters: {n: 2}\n"
        "  - id: large\n    parameters: {n: 40}\n"
        "hello.py:\n  - {name: Ada}\n  - {name: Bob Smith}\n"
        "'reports/*.ipynb':\n  year: 2024\n"
        "untouched.py:\n",
    )
    sets = load_parameter_sets(sets_file)
    assert sets is not None
    base = tmp_path / "ci"
    [one] = sets.for_notebook(base / "logbook.md")
    assert one.id is None and one.parameters == {"station": "north-3"}
    assert [(s.id, s.parameters) for s in sets.for_notebook(base / "frames.py")] == [
        ("small", {"n": 2}),
        ("large", {"n": 40}),
    ]
    # Plain mappings, as sweep -f reads them: readable ids made of the values.
    assert [s.label("hello.py") for s in sets.for_notebook(base / "hello.py")] == [
        "hello.py[name=Ada]",
        "hello.py[name=Bob_Smith]",
    ]
    assert sets.for_notebook(base / "reports" / "q1.ipynb")[0].parameters == {"year": 2024}
    assert sets.for_notebook(base / "untouched.py") == (DEFAULT_SET,)
    assert sets.for_notebook(base / "elsewhere.py") == (DEFAULT_SET,)
    assert sets.for_notebook(tmp_path / "logbook.md") == (DEFAULT_SET,)  # outside the folder
    cases = check_cases([str(base / "frames.py"), str(base / "logbook.md")], sets)
    assert [case.label for case in cases] == [
        f"{base}/frames.py[small]",
        f"{base}/frames.py[large]",
        f"{base}/logbook.md",
    ]
    assert check_cases(["a.py"], None) == [CheckCase("a.py", DEFAULT_SET)]


@pytest.mark.parametrize(
    ("text", "names"),
    [
        ("- a\n- b\n", "mapping of notebook paths"),
        ("a.py: 3\n", "'a.py': give a mapping of parameters, or a list"),
        ("a.py:\n  - {id: x, parameters: {n: 1}}\n  - {id: x, parameters: {n: 2}}\n", "two sets"),
        ("a.py:\n  - {id: 'bad id!', parameters: {n: 1}}\n  - {n: 2}\n", "id 'bad id!'"),
        ("a.py:\n  - 3\n", "set 0: a set is a mapping"),
        ("a.py: [unclosed\n", "not valid YAML"),
    ],
)
def test_a_bad_parameter_sets_file_is_refused_naming_the_problem(
    tmp_path: Path, text: str, names: str
) -> None:
    with pytest.raises(InvalidArgumentError, match=re.escape(names)):
        load_parameter_sets(_write(tmp_path / "sets.yaml", text))
    with pytest.raises(InvalidArgumentError, match="cannot be read"):
        load_parameter_sets(tmp_path / "missing.yaml")


def _stream(text: str) -> dict[str, object]:
    return {"output_type": "stream", "name": "stdout", "text": text}


def test_normalisation_ignores_timestamps_uuids_addresses_ansi_and_user_rules(
    tmp_path: Path,
) -> None:
    rules_file = _write(tmp_path / "sanitize.cfg", "[seeds]\nregex: seed \\d+\nreplace: seed N\n")
    rules = OutputRules(rules=load_rules(rules_file))
    a = [
        _stream(
            "\x1b[31mat 2024-05-01T12:30:00.123+00:00\x1b[0m id 0b7a1c3e-1111-2222-3333-"
            "444455556666 seed 1   \n"
        ),
        {
            "output_type": "execute_result",
            "data": {"text/plain": "<A at 0x7f00deadbeef>", "image/png": "AAAA"},
            "metadata": {},
            "execution_count": 3,
        },
    ]
    b = [
        _stream("at 2026-11-26 14:00:59 id 6f1c2004-1fcb-40b3-8236-f4321998897a seed 99\n"),
        {
            "output_type": "execute_result",
            "data": {"text/plain": "<A at 0x55aa00>", "image/png": "BBBB"},
            "metadata": {},
            "execution_count": 9,
        },
    ]
    assert comparable(a, rules) == comparable(b, rules)
    assert comparable(a, OutputRules()) != comparable(b, OutputRules())  # the seed differs
    changed = [_stream("at 2026-11-26 14:00:59 value 2\n")]
    diff = readable_diff(comparable([_stream("value 1\n")], rules), comparable(changed, rules))
    assert diff.splitlines()[:2] == ["--- golden", "+++ this run"]
    assert "-value 1" in diff and "+<timestamp> value 2" not in diff
    assert "+at <timestamp> value 2" in diff


def test_a_bad_sanitize_file_is_refused(tmp_path: Path) -> None:
    with pytest.raises(InvalidArgumentError, match="has no regex"):
        load_rules(_write(tmp_path / "a.cfg", "[x]\nreplace: y\n"))
    with pytest.raises(InvalidArgumentError, match="bad regex"):
        load_rules(_write(tmp_path / "b.cfg", "[x]\nregex: (unclosed\n"))


def test_golden_outputs_of_a_text_source_live_beside_it_per_parameter_set(tmp_path: Path) -> None:
    source = _write(tmp_path / "analysis.py", "# %%\nprint(1)\n")
    assert golden_path(source) == tmp_path / "analysis.py.golden.json"
    assert stored_outputs(source, None, None) is None
    store_outputs(source, None, {0: [_stream("1\n")]})
    store_outputs(source, "large", {0: [_stream("2\n")]})
    assert stored_outputs(source, None, None) == {0: [_stream("1\n")]}
    assert stored_outputs(source, None, "large") == {0: [_stream("2\n")]}
    assert stored_outputs(source, None, "other") is None
    data = json.loads(golden_path(source).read_text(encoding="utf-8"))
    assert set(data["sets"]) == {"", "large"}


def test_golden_outputs_of_an_ipynb_are_its_own_and_only_compared_cells_change(
    tmp_path: Path,
) -> None:
    path = tmp_path / "nb.ipynb"
    cells = [nbformat.v4.new_code_cell("print(1)"), nbformat.v4.new_code_cell("print(2)")]
    cells[1].outputs = [nbformat.v4.new_output("stream", name="stdout", text="kept\n")]
    nbformat.write(nbformat.v4.new_notebook(cells=cells), path)
    nb = nbformat.read(path, as_version=4)
    assert golden_path(path) == path
    # Its only set's: the cells run when it was saved (cell 0 never was); a named set's are
    # beside it.
    assert stored_outputs(path, nb, None) == {1: [nb.cells[1].outputs[0]]}
    assert stored_outputs(path, nb, "any") is None
    assert golden_path(path, "any") == tmp_path / "nb.ipynb.golden.json"
    result = {
        "output_type": "execute_result",
        "data": {"text/plain": "1"},
        "metadata": {},
        "execution_count": 4,
    }
    store_outputs(path, None, {0: [result]})
    # A notebook nbformat wrote changes in the compared cell only.
    expected = nb
    expected.cells[0].outputs = [nbformat.from_dict(result)]
    expected.cells[0].execution_count = 4
    assert path.read_text(encoding="utf-8") == nbformat.writes(expected) + "\n"
    again = nbformat.read(path, as_version=4)
    nbformat.validate(again)
    assert again.cells[0].outputs[0]["data"] == {"text/plain": "1"}
    assert again.cells[0].execution_count == 4
    assert again.cells[1].outputs[0]["text"] == "kept\n"
    assert [c.source for c in again.cells] == ["print(1)", "print(2)"]


def test_check_lines_json_and_junit_show_skips_and_parameter_sets() -> None:
    skipped = CheckResult(
        "notebooks/logbook.md", True, [], 0.1, skipped="needs parameter station, not given"
    )
    failed = CheckResult(
        "notebooks/frames.py",
        False,
        [{"cell": 2, "severity": "error", "message": "cell_error: KeyError: 'x'"}],
        0.2,
        set_id="large",
        report="cell 2: cell_error: KeyError: 'x'\n  code:\n    d['x']",
    )
    assert skipped.line() == "skip  notebooks/logbook.md: needs parameter station, not given"
    assert failed.line() == "FAIL  notebooks/frames.py[large]: cell 2: cell_error: KeyError: 'x'"
    assert skipped.as_json()["skipped"] == "needs parameter station, not given"
    assert failed.as_json()["parameter_set"] == "large"
    plain = CheckResult("a.py", True, [], 0.1)
    assert plain.as_json() == {"path": "a.py", "valid": True, "problems": []}
    from xml.etree import ElementTree

    suite = ElementTree.fromstring(junit_xml([skipped, failed])).find("testsuite")
    assert suite is not None and suite.get("skipped") == "1" and suite.get("failures") == "1"
    names = [case.get("name") for case in suite.iter("testcase")]
    assert names == ["notebooks/logbook.md", "notebooks/frames.py[large]"]
    failure = suite.find("testcase[2]/failure")
    assert failure is not None and "    d['x']" in (failure.text or "")
