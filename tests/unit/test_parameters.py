"""Parameters: parsing a parameters cell, validating, converting command-line text, injecting."""

from __future__ import annotations

import ast
import math
import pickle
from typing import Any

import nbformat
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from notebook_executor import ParameterError
from notebook_executor._parameters.declared import (
    INJECTED_TAG,
    Parameter,
    declared_parameters,
    parse_parameters,
)
from notebook_executor._parameters.values import (
    convert_text_value,
    inject_parameters,
    validate_parameters,
)
from notebook_executor._sources.literals import is_literal_value, to_literal

# -- parse_parameters ----------------------------------------------------------------------------


def _one(source: str) -> Parameter:
    found = parse_parameters(source)
    assert len(found) == 1, found
    return next(iter(found.values()))


@pytest.mark.parametrize(
    ("source", "type_name", "default", "required", "nullable"),
    [
        ("x: int = 1", "int", 1, False, False),
        ("x: float = 0.5", "float", 0.5, False, False),
        ("x: str = 'a'", "str", "a", False, False),
        ("x: bool = False", "bool", False, False, False),
        ("x: list = [1, 2]", "list", [1, 2], False, False),
        ("x: dict = {'a': 1}", "dict", {"a": 1}, False, False),
        ("x: Optional[int] = None", "int", None, False, True),
        ("x: typing.Optional[str] = 'a'", "str", "a", False, True),
        ("x: int | None = 3", "int", 3, False, True),
        ("x: None | float = None", "float", None, False, True),
        ("x: typing.List[int] = [1]", "list", [1], False, False),
        ("x: List[str] = []", "list", [], False, False),
        ("x: Dict[str, int] = {}", "dict", {}, False, False),
        ("x: tuple = (1, 2)", "list", [1, 2], False, False),
        ("x: 'int' = 4", "int", 4, False, False),
        ("x: 'Optional[float]' = None", "float", None, False, True),
        ("x: 'int | None' = None", "int", None, False, True),
        ("x: Union[int, str] = 1", "any", 1, False, False),
        ("x: Any = 1", "any", 1, False, False),
        ("x: SomeClass = 1", "any", 1, False, False),
        ("x: int = ...", "int", None, True, False),
        ("x = ...", "any", None, True, False),
        ("x: list", "list", None, True, False),
        ("x: str", "str", None, True, False),
        ("x = 1", "int", 1, False, False),
        ("x = -1", "int", -1, False, False),
        ("x = 1e3", "float", 1000.0, False, False),
        ("x = 'a'", "str", "a", False, False),
        ("x = True", "bool", True, False, False),
        ("x = [1, 'a']", "list", [1, "a"], False, False),
        ("x = (1,)", "list", [1], False, False),
        ("x = {'k': [1]}", "dict", {"k": [1]}, False, False),
        ("x = None", "any", None, False, True),
    ],
)
def test_parameter_shapes(
    source: str, type_name: str, default: Any, required: bool, nullable: bool
) -> None:
    parameter = _one(source)
    assert parameter.name == "x"
    assert (parameter.type, parameter.default, parameter.required, parameter.nullable) == (
        type_name,
        default,
        required,
        nullable,
    )
    assert type(parameter.default) is type(default)


def test_non_literal_default_is_kept_for_the_kernel() -> None:
    parameter = _one("when = pd.Timestamp('2024-01-01')  # start date")
    assert parameter.literal_default is False
    assert parameter.required is False
    assert parameter.help == "start date"
    # Not given: it is left out of the effective values (the kernel computes it).
    assert validate_parameters({"when": parameter}, {}) == {}
    assert validate_parameters({"when": parameter}, {"when": "2024"}) == {"when": "2024"}


def test_annotated_non_literal_default_keeps_the_annotation_type() -> None:
    parameter = _one("n: int = len('abc')")
    assert (parameter.type, parameter.literal_default, parameter.required) == ("int", False, False)


def test_help_comes_from_the_trailing_comment() -> None:
    found = parse_parameters(
        "# a leading comment is not help\n"
        "name: str = 'world'  # who to greet\n"
        "times = 1 #   how many times  \n"
        "plain = 2\n"
        "s = '# not a comment'\n"
    )
    assert {n: p.help for n, p in found.items()} == {
        "name": "who to greet",
        "times": "how many times",
        "plain": "",
        "s": "",
    }
    assert found["s"].default == "# not a comment"


def test_multi_line_literal_values() -> None:
    found = parse_parameters(
        "items = [\n    1,\n    2,\n]  # the items\n"
        "config = {\n    'a': {'b': [1, 2]},\n}\n"
        'text = """two\nlines"""\n'
        "after = 5\n"
    )
    assert found["items"].default == [1, 2]
    assert found["items"].help == "the items"
    assert found["config"].default == {"a": {"b": [1, 2]}}
    assert found["text"].default == "two\nlines"
    assert found["after"].default == 5
    assert list(found) == ["items", "config", "text", "after"]


def test_magics_and_shell_lines_are_ignored() -> None:
    found = parse_parameters("%matplotlib inline\n!pip list\n  %time y = 2\nx = 1\n%%capture\n")
    assert list(found) == ["x"]


def test_other_statements_are_ignored() -> None:
    found = parse_parameters(
        "import os\na, b = 1, 2\nc = d = 3\nobj.attr = 4\nitems[0] = 5\nx = 1\n"
        "def f():\n    inner = 1\nif True:\n    nested = 2\nfor i in []:\n    pass\n"
    )
    assert list(found) == ["x"]


@pytest.mark.parametrize("source", ["x = (", "def f(:\n", "x = 1\n  y = 2", "x ==== 1"])
def test_a_syntax_error_declares_no_parameters(source: str) -> None:
    assert parse_parameters(source) == {}


def test_reassignment_keeps_the_last_declaration() -> None:
    assert _one("x = 1\nx: str = 'a'").default == "a"


def test_as_dict_is_the_public_form() -> None:
    assert _one("x: int = 2  # two").as_dict() == {
        "name": "x",
        "type": "int",
        "default": 2,
        "help": "two",
        "required": False,
    }


def test_declared_parameters_uses_the_first_tagged_code_cell() -> None:
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_markdown_cell("x = 0", metadata={"tags": ["parameters"]}),
        nbformat.v4.new_code_cell("y = 1"),
        nbformat.v4.new_code_cell("z = 2", metadata={"tags": ["parameters"]}),
        nbformat.v4.new_code_cell("w = 3", metadata={"tags": ["parameters"]}),
    ]
    assert list(declared_parameters(nb)) == ["z"]
    assert declared_parameters(nbformat.v4.new_notebook()) == {}


# -- validate_parameters -------------------------------------------------------------------------

DECLARED = parse_parameters(
    "name: str = 'world'  # who\n"
    "count: int = 1\n"
    "ratio: float = 0.5\n"
    "flag: bool = False\n"
    "tags: list = []\n"
    "options: dict = {}\n"
    "limit: Optional[int] = None\n"
    "anything = None\n"
    "needed: str = ...\n"
)


def test_valid_values_overlay_the_defaults() -> None:
    effective = validate_parameters(DECLARED, {"needed": "n", "count": 3, "limit": None})
    assert effective == {
        "name": "world",
        "count": 3,
        "ratio": 0.5,
        "flag": False,
        "tags": [],
        "options": {},
        "limit": None,
        "anything": None,
        "needed": "n",
    }


def test_int_fits_a_float_parameter_and_becomes_float() -> None:
    effective = validate_parameters(DECLARED, {"needed": "n", "ratio": 2})
    assert effective["ratio"] == 2.0
    assert isinstance(effective["ratio"], float)


def test_tuple_fits_a_list_parameter() -> None:
    assert validate_parameters(DECLARED, {"needed": "n", "tags": ("a", "b")})["tags"] == ["a", "b"]


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("count", True),  # bool is not int
        ("count", 1.0),
        ("count", "1"),
        ("ratio", True),
        ("ratio", "0.5"),
        ("flag", 1),
        ("flag", "true"),
        ("name", 1),
        ("name", None),
        ("tags", "a,b"),
        ("tags", {"a": 1}),
        ("options", [1]),
        ("limit", 1.5),
        ("anything", object()),
        ("anything", {1, 2}),
        ("anything", b"bytes"),
    ],
)
def test_a_value_that_does_not_fit_is_refused(name: str, value: Any) -> None:
    with pytest.raises(ParameterError) as info:
        validate_parameters(DECLARED, {"needed": "n", name: value})
    error = info.value
    assert error.parameter == name
    assert repr(name) in str(error)
    assert DECLARED[name].type in error.problems[0]


@pytest.mark.parametrize(("name", "value"), [("anything", None), ("limit", None)])
def test_none_fits_nullable_and_any(name: str, value: Any) -> None:
    assert validate_parameters(DECLARED, {"needed": "n", name: value})[name] is None


def test_unknown_parameter_is_named_and_the_declared_ones_are_listed() -> None:
    with pytest.raises(ParameterError) as info:
        validate_parameters(DECLARED, {"needed": "n", "nmae": "typo"})
    message = str(info.value)
    assert info.value.parameter == "nmae"
    assert "unknown parameter 'nmae'" in message
    for name, parameter in DECLARED.items():
        assert f"{name}: {parameter.type}" in message
    assert "needed: str (required)" in message
    assert "count: int = 1" in message


def test_missing_required_parameter() -> None:
    with pytest.raises(ParameterError) as info:
        validate_parameters(DECLARED, {})
    assert info.value.parameter == "needed"
    assert "missing required parameter 'needed'" in str(info.value)


def test_every_problem_is_reported() -> None:
    with pytest.raises(ParameterError) as info:
        validate_parameters(DECLARED, {"count": "x", "bogus": 1})
    assert len(info.value.problems) == 3
    assert info.value.parameter == "bogus"


def test_a_notebook_without_parameters_says_so() -> None:
    with pytest.raises(ParameterError) as info:
        validate_parameters({}, {"x": 1})
    assert "no cell tagged 'parameters'" in str(info.value)
    assert validate_parameters({}, None) == {}


def test_parameter_error_pickles() -> None:
    with pytest.raises(ParameterError) as info:
        validate_parameters(DECLARED, {"count": "x"})
    error = info.value
    copy = pickle.loads(pickle.dumps(error))
    assert type(copy) is ParameterError
    assert str(copy) == str(error)
    assert (copy.parameter, copy.problems, copy.declared) == (
        error.parameter,
        error.problems,
        error.declared,
    )


def test_long_values_are_shortened_in_the_message() -> None:
    with pytest.raises(ParameterError) as info:
        validate_parameters(DECLARED, {"needed": "n", "count": "x" * 1000})
    assert len(info.value.problems[0]) < 200


# -- convert_text_value --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("True", True),
        ("False", False),
        ("None", None),
        ("12", 12),
        ("-3", -3),
        ("1.5", 1.5),
        ("1e3", 1000.0),
        ("hello", "hello"),
        ("true", "true"),  # papermill: only the exact Python spellings
        ("[1, 2]", "[1, 2]"),
    ],
)
def test_undeclared_text_converts_like_papermill(text: str, expected: Any) -> None:
    value = convert_text_value(None, text)
    assert value == expected
    assert type(value) is type(expected)


def _p(source: str) -> Parameter:
    return _one(source)


@pytest.mark.parametrize(
    ("declaration", "text", "expected"),
    [
        ("x: str = ''", "123", "123"),
        ("x: str = ''", "True", "True"),
        ("x: str = ''", "None", "None"),
        ("x: Optional[str] = None", "None", None),
        ("x: str = ''", " padded ", " padded "),
        ("x: int = 0", "7", 7),
        ("x: float = 0.0", "7", 7.0),
        ("x: float = 0.0", "7.5", 7.5),
        ("x: bool = False", "true", True),
        ("x: bool = False", "FALSE", False),
        ("x: bool = False", "True", True),
        ("x: bool = False", " True ", True),
        ("x: list = []", "[1, 2]", [1, 2]),
        ("x: list = []", '["a", "b"]', ["a", "b"]),
        ("x: list = []", "[a, b]", ["a", "b"]),
        ("x: list = []", "- a\n- b", ["a", "b"]),
        ("x: dict = {}", '{"a": 1}', {"a": 1}),
        ("x: dict = {}", "{a: 1, b: [x]}", {"a": 1, "b": ["x"]}),
        ("x: dict = {}", "a: 1", {"a": 1}),
        ("x = None", "[1, 2]", [1, 2]),
        ("x = None", "{a: 1}", {"a": 1}),
        ("x = None", "text", "text"),
        ("x = None", "3", 3),
    ],
)
def test_text_converts_to_the_declared_type(declaration: str, text: str, expected: Any) -> None:
    value = convert_text_value(_p(declaration), text)
    assert value == expected
    assert type(value) is type(expected)


@pytest.mark.parametrize(
    ("declaration", "text"),
    [
        ("x: int = 0", "1.5"),
        ("x: int = 0", "seven"),
        ("x: bool = False", "yes"),
        ("x: bool = False", "1"),
        ("x: list = []", "{unclosed"),
        ("x: dict = {}", "[1]"),
    ],
)
def test_text_that_does_not_fit_is_left_for_validation(declaration: str, text: str) -> None:
    parameter = _p(declaration)
    value = convert_text_value(parameter, text)
    with pytest.raises(ParameterError):
        validate_parameters({"x": parameter}, {"x": value})


# -- literals and injection ----------------------------------------------------------------------

_scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text()
)
_values = st.recursive(
    _scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=12,
)


def _same(a: Any, b: Any) -> bool:
    """Equality that treats nan as equal to nan and tells bool, int and float apart."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return (math.isnan(a) and math.isnan(b)) or a == b
    if isinstance(a, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict):
        return list(a) == list(b) and all(_same(a[k], b[k]) for k in a)
    return bool(a == b)


_SAFE_CALLS = {"float('nan')", "float('inf')", "float('-inf')"}


def _assert_only_literals(node: ast.AST) -> None:
    """Fail unless ``node`` holds nothing but literals (and float('nan'/'inf'/'-inf'))."""
    if isinstance(node, ast.Call):
        assert ast.unparse(node) in _SAFE_CALLS, ast.unparse(node)
        return
    allowed = (
        ast.Expression,
        ast.Constant,
        ast.List,
        ast.Tuple,
        ast.Dict,
        ast.UnaryOp,
        ast.USub,
        ast.UAdd,
        ast.Load,
    )
    assert isinstance(node, allowed), ast.dump(node)
    for child in ast.iter_child_nodes(node):
        _assert_only_literals(child)


@settings(max_examples=300, deadline=None, database=None)
@given(_values)
def test_literals_evaluate_back_to_the_value_and_run_no_code(value: Any) -> None:
    source = to_literal(value)
    _assert_only_literals(ast.parse(source, mode="eval"))
    back = eval(source, {"__builtins__": {"float": float}})
    assert _same(back, value), (value, source, back)
    assert is_literal_value(value)


@settings(max_examples=200, deadline=None, database=None)
@given(st.text())
def test_any_string_is_a_plain_literal(text: str) -> None:
    assert ast.literal_eval(to_literal(text)) == text


def test_tuples_and_non_literals() -> None:
    assert eval(to_literal((1,))) == (1,)
    assert eval(to_literal(())) == ()
    for value in (object(), {1, 2}, b"x", 1j, [object()]):
        assert not is_literal_value(value)
        with pytest.raises(TypeError):
            to_literal(value)
    deep: list[Any] = []
    for _ in range(5000):
        deep = [deep]
    assert not is_literal_value(deep)


def _notebook(*cells: Any) -> Any:
    nb = nbformat.v4.new_notebook()
    nb.cells = list(cells)
    return nb


def test_injection_goes_right_after_the_parameters_cell() -> None:
    nb = _notebook(
        nbformat.v4.new_markdown_cell("# Title"),
        nbformat.v4.new_code_cell("x = 1", metadata={"tags": ["parameters"]}),
        nbformat.v4.new_code_cell("print(x)"),
    )
    assert inject_parameters(nb, {"x": 2}) == 2
    cell = nb.cells[2]
    assert cell.cell_type == "code"
    assert cell.metadata["tags"] == [INJECTED_TAG]
    assert cell.source == "# Parameters\nx = 2"
    assert [c.source for c in nb.cells] == ["# Title", "x = 1", "# Parameters\nx = 2", "print(x)"]


def test_injection_goes_first_without_a_parameters_cell() -> None:
    nb = _notebook(nbformat.v4.new_markdown_cell("m"), nbformat.v4.new_code_cell("y = 1"))
    assert inject_parameters(nb, {"x": 2}) == 0
    assert nb.cells[0].metadata["tags"] == [INJECTED_TAG]


def test_nothing_to_inject_inserts_nothing() -> None:
    nb = _notebook(nbformat.v4.new_code_cell("x = 1", metadata={"tags": ["parameters"]}))
    assert inject_parameters(nb, {}) is None
    assert len(nb.cells) == 1


HOSTILE = [
    "'; import os; os.system('echo pwned') #",
    '"""\n__import__("os").system("echo pwned")\n"""',
    "\\'; raise SystemExit #",
    "line\nbreak\r\nand\x00nul",
    "{__import__('os')}",
    "\u2028\u2029 unicode separators",
    "\\N{BULLET} \\x41 \\",
]


@pytest.mark.parametrize("text", HOSTILE)
def test_an_injected_string_never_runs_as_code(text: str) -> None:
    nb = _notebook(nbformat.v4.new_code_cell("s = ''", metadata={"tags": ["parameters"]}))
    values = {"s": text, "nested": {"k": [text, None, 1.5]}}
    index = inject_parameters(nb, values)
    assert index == 1
    tree = ast.parse(nb.cells[1].source)
    for statement in tree.body:
        assert isinstance(statement, ast.Assign)
        assert isinstance(statement.targets[0], ast.Name)
        _assert_only_literals(ast.Expression(statement.value))
    namespace: dict[str, Any] = {"__builtins__": {"float": float}}
    exec(nb.cells[1].source, namespace)
    assert namespace["s"] == text
    assert namespace["nested"] == {"k": [text, None, 1.5]}


def test_a_parse_kept_for_the_next_run_gives_each_caller_its_own_defaults() -> None:
    source = 'xs = [1, 2]  # numbers\nopts = {"a": [3]}\nname = "n"\n'
    first = parse_parameters(source)
    first["xs"].default.append(99)
    first["opts"].default["a"].append(4)
    del first["name"]
    again = parse_parameters(source)
    assert list(again) == ["xs", "opts", "name"]
    assert again["xs"].default == [1, 2]
    assert again["xs"].help == "numbers"
    assert again["opts"].default == {"a": [3]}
    assert again["name"].default == "n"
    changed = parse_parameters(source.replace("[1, 2]", "[5]"))
    assert changed["xs"].default == [5]
