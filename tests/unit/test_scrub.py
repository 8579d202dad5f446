"""What a run stores: streams coalesced, secrets found in pieces, in bytes and in DataFrames,
short secrets left alone, failed cells clipped to a small result."""

from __future__ import annotations

import base64
import io
import json
from typing import Any

import pandas as pd
import pytest

from leaks import traces
from notebook_executor._dispatch.live_output import OutputPrinter
from notebook_executor._notebook import NotebookNode, new_code_cell, new_notebook, new_output
from notebook_executor._records.results import CellMap, build_result
from notebook_executor._records.scrub import (
    MIN_SECRET_CHARS,
    Redactor,
    coalesce_streams,
    redact,
    scrub_notebook,
)
from notebook_executor._types import RunResult
from notebook_executor.engine import CellFailure, EngineOutcome
from support import failed_cell

TOKEN = "tok_live_9f8E7d6C5b4A3x2Y1z0"


def _stream(text: str, name: str = "stdout") -> Any:
    return new_output("stream", name=name, text=text)


def _notebook(*outputs: Any) -> NotebookNode:
    cell = new_code_cell("x")
    cell.outputs = list(outputs)
    return new_notebook(cells=[cell])


def test_consecutive_streams_of_one_name_are_merged_in_order() -> None:
    nb = _notebook(
        _stream("a"),
        _stream("b"),
        _stream("e", "stderr"),
        _stream("c"),
        new_output("display_data", data={"text/plain": "d"}),
        _stream("f"),
    )
    coalesce_streams(nb)
    assert [(o.output_type, o.get("name"), o.get("text")) for o in nb.cells[0].outputs] == [
        ("stream", "stdout", "ab"),
        ("stream", "stderr", "e"),
        ("stream", "stdout", "c"),
        ("display_data", None, None),
        ("stream", "stdout", "f"),
    ]


@pytest.mark.parametrize("cut", [1, 9, len(TOKEN) - 1])
def test_a_secret_in_pieces_is_found_across_outputs(cut: int) -> None:
    nb = _notebook(
        _stream("key: " + TOKEN[:cut]),
        new_output("display_data", data={"text/plain": "between"}),
        _stream(TOKEN[cut:] + " end\n"),
    )
    scrubbed = scrub_notebook(nb, {"T": TOKEN})
    texts = [o.get("text") for o in scrubbed.cells[0].outputs]
    assert texts == ["key: [secret T]", None, " end\n"]
    assert nb.cells[0].outputs[0].text == "key: " + TOKEN[:cut]  # the input is not changed


def test_pieces_keep_their_parts_apart() -> None:
    redactor = Redactor({"T": TOKEN})
    assert redactor.pieces(["a" + TOKEN[:4], TOKEN[4:10], TOKEN[10:] + "b", "c"]) == [
        "a[secret T]",
        "",
        "b",
        "c",
    ]


def test_short_secrets_are_not_searched_and_damage_nothing() -> None:
    short = "1" * (MIN_SECRET_CHARS - 1)
    redactor = Redactor({"PIN": "1", "CODE": short, "T": TOKEN})
    assert redactor.unsearched == ["CODE", "PIN"]
    assert redactor.text(f"version 1.10 {short} {TOKEN}") == f"version 1.10 {short} [secret T]"
    assert redact("version 1.10", {"PIN": "1"}) == "version 1.10"


def test_binary_outputs_holding_a_secret_are_withheld() -> None:
    leaky = base64.b64encode(b"\x89PNG" + TOKEN.encode("utf-16-le")).decode()
    clean = base64.b64encode(b"\x89PNG clean").decode()
    nb = _notebook(
        new_output("display_data", data={"image/png": leaky}),
        new_output("display_data", data={"image/png": clean}),
    )
    outputs = scrub_notebook(nb, {"T": TOKEN}).cells[0].outputs
    assert outputs[0].data == {
        "text/plain": "[notebook-executor: output withheld: it holds the value of secret T]"
    }
    assert outputs[1].data == {"image/png": clean}


def _pandas_scrap(name: str, frame: pd.DataFrame) -> Any:
    buffer = io.BytesIO()
    frame.to_parquet(buffer)
    payload = {
        "name": name,
        "data": base64.b64encode(buffer.getvalue()).decode(),
        "encoder": "pandas",
        "version": 1,
    }
    return new_output(
        "display_data",
        data={"application/scrapbook.scrap.pandas+json": payload},
        metadata={"scrapbook": {"name": name, "data": True, "display": False}},
    )


@pytest.mark.parametrize(
    "frame",
    [
        pd.DataFrame({"key": ["x", TOKEN]}),
        pd.DataFrame({TOKEN: [1, 2]}),
        pd.DataFrame({"n": [1, 2]}, index=pd.Index(["a", TOKEN], name="who")),
        pd.DataFrame({"k": pd.Categorical([TOKEN, "x"])}),
    ],
    ids=["value", "column", "index", "categorical"],
)
def test_dataframe_scraps_holding_a_secret_are_withheld(frame: pd.DataFrame) -> None:
    nb = _notebook(_pandas_scrap("leaky", frame), _pandas_scrap("clean", pd.DataFrame({"a": [1]})))
    outputs = scrub_notebook(nb, {"T": TOKEN}).cells[0].outputs
    marker = outputs[0].data["application/scrapbook.scrap.json+json"]
    assert marker["name"] == "leaky"
    assert marker["data"] == {"encoder": "pandas", "withheld": "it holds the value of secret T"}
    assert "application/scrapbook.scrap.pandas+json" in outputs[1].data
    assert TOKEN not in json.dumps(outputs)


def test_an_unreadable_dataframe_scrap_is_withheld_in_a_run_with_secrets() -> None:
    scrap = _pandas_scrap("broken", pd.DataFrame({"a": [1]}))
    scrap.data["application/scrapbook.scrap.pandas+json"]["data"] = "bm90IHBhcnF1ZXQ="
    outputs = scrub_notebook(_notebook(scrap), {"T": TOKEN}).cells[0].outputs
    reason = outputs[0].data["application/scrapbook.scrap.json+json"]["data"]["withheld"]
    assert reason.startswith("it could not be read back to check it for secrets")
    # Without secrets nothing is withheld.
    kept = scrub_notebook(_notebook(scrap), {}).cells[0].outputs
    assert "application/scrapbook.scrap.pandas+json" in kept[0].data


def _failed(failure: CellFailure, secrets: dict[str, str] | None = None) -> RunResult:
    nb = new_notebook(cells=[new_code_cell("1 / 0")])
    return build_result(
        run_id="r",
        notebook_path="n.py",
        output_path="o.ipynb",
        parameters={},
        request=None,
        started_at="s",
        finished_at="f",
        duration_seconds=1.0,
        executed=nb,
        outcome=EngineOutcome(failure=failure),
        cell_map=CellMap(None),
        secrets=secrets,
    )


@pytest.mark.parametrize(
    ("ename", "evalue", "traceback"),
    [
        ("ValueError", "x" * 50_000, ["---", "ValueError: " + "x" * 50_000]),
        ("E" * 50_000, "boom", ["E: boom"]),
        ("ValueError", "\x01\u00e9\U0001f511" * 20_000, []),
        ("ValueError", "v", ["line\n" * 10] * 100_000),
        ("ValueError", "line\n" * 50_000, ["\x1b[31m" + "y" * 100_000 + "\x1b[0m"] * 20),
    ],
    ids=["huge-message", "huge-name", "escapes", "many-lines", "huge-lines"],
)
def test_a_failed_cell_keeps_the_result_small(
    ename: str, evalue: str, traceback: list[str]
) -> None:
    result = _failed(CellFailure(0, "cell_error", ename, evalue, traceback))
    assert len(json.dumps(result)) < 20_000
    assert failed_cell(result)["ename"]


def test_a_secret_across_the_clip_leaves_no_piece() -> None:
    evalue = "x" * (4_000 - 70) + TOKEN + "y" * 10_000
    result = _failed(CellFailure(0, "cell_error", "E", evalue, []), {"T": TOKEN})
    assert TOKEN[:5] not in failed_cell(result)["evalue"]
    assert "[secret T]" in failed_cell(result)["evalue"]


# -- shapes: escape codes inside a secret, markup, printed bytes -------------------------------

#: A secret that is not ASCII: its bytes print as escapes.
UNI = "Zq7S\u00e9cret-42xy"
SECRETS = {"T": TOKEN, "U": UNI}


def _no_trace(text: str) -> None:
    """No form of either secret in ``text``, as it is, as it shows, nor decoded."""
    assert traces(text, SECRETS) == []


@pytest.mark.parametrize(
    "codes",
    [
        {9: "\x1b[0m"},
        {4: "\x1b[1;31m", 20: "\x1b[0m\x1b[K"},
        {5: "\x1b]8;;https://example.com\x1b\\"},
        {5: "\x1b]0;title\x07"},
        {3: "\x9b4m"},
        {7: "\x1b(B"},
        {1: "\u200b", 2: "\u00ad", 3: "\ufeff"},
        {n: f"\x1b[3{n % 8}m" for n in range(1, len(TOKEN))},
    ],
    ids=["reset", "two", "hyperlink", "title", "8-bit-csi", "charset", "zero-width", "every"],
)
def test_a_secret_with_escape_codes_inside_is_found(codes: dict[int, str]) -> None:
    hidden = "".join(codes.get(n, "") + c for n, c in enumerate(TOKEN))
    text = f"\x1b[32mkey:\x1b[0m {hidden} \x1b[1mend\x1b[0m\n"
    redacted = Redactor(SECRETS).text(text)
    assert redacted == "\x1b[32mkey:\x1b[0m [secret T] \x1b[1mend\x1b[0m\n"
    _no_trace(redacted)


def test_a_secret_inside_an_escape_sequence_is_found() -> None:
    redactor = Redactor(SECRETS)
    assert redactor.text(f"\x1b]0;{TOKEN}\x07 shown") == "\x1b]0;[secret T]\x07 shown"
    assert redactor.text("ordinary \x1b[31mred\x1b[0m text") == "ordinary \x1b[31mred\x1b[0m text"


def test_escape_codes_in_stored_outputs_hide_no_secret() -> None:
    """Streams (also split), results and errors (message and traceback) of a stored notebook."""
    coloured = TOKEN[:9] + "\x1b[31m" + TOKEN[9:]
    nb = _notebook(
        _stream("a: " + TOKEN[:4] + "\x1b["),
        _stream("0m" + TOKEN[4:] + "\n"),
        new_output("execute_result", data={"text/plain": coloured}, execution_count=1),
        new_output(
            "error",
            ename="ValueError",
            evalue=coloured,
            traceback=["\x1b[0;31mValueError\x1b[0m: " + coloured],
        ),
    )
    scrubbed = scrub_notebook(nb, SECRETS)
    _no_trace(json.dumps(scrubbed))
    outputs = scrubbed.cells[0].outputs
    assert outputs[0].text == "a: [secret T]\n"  # the two streams, merged
    assert outputs[2].evalue == "[secret T]"


def test_streams_of_all_cells_are_one_text() -> None:
    """Half a secret on stdout and half on stderr, or half in each of two cells."""
    first, second = new_code_cell("a"), new_code_cell("b")
    first.outputs = [_stream("x " + TOKEN[:9]), _stream(TOKEN[9:] + " y\n", "stderr")]
    first.outputs.append(_stream("z " + UNI[:7]))
    second.outputs = [_stream(UNI[7:] + "\n")]
    scrubbed = scrub_notebook(new_notebook(cells=[first, second]), SECRETS)
    texts = [o.text for cell in scrubbed.cells for o in cell.outputs]
    assert texts == ["x [secret T]", " y\n", "z [secret U]", "\n"]


def _entities(text: str, style: str) -> str:
    if style == "decimal":
        return "".join(f"&#{ord(c)};" for c in text)
    if style == "hex":
        return "".join(f"&#x{ord(c):x};" for c in text)
    named = {"_": "&lowbar;", "\u00e9": "&eacute;", "-": "&#45;"}
    return "".join(named.get(c, c if n % 2 else f"&#X{ord(c):X};") for n, c in enumerate(text))


@pytest.mark.parametrize(
    ("mime", "markup"),
    [
        ("text/html", _entities(TOKEN, "decimal")),
        ("text/html", "<p>" + _entities(TOKEN, "hex") + "</p>"),
        ("text/html", _entities(UNI, "mixed")),
        ("text/html", "".join(f"<span>{c}</span>" for c in TOKEN)),
        ("text/html", f'<a title="{_entities(TOKEN, "decimal")}">link</a>'),
        ("text/markdown", "**" + _entities(UNI, "decimal") + "**"),
        ("text/markdown", TOKEN.replace("_", "\\_").replace("-", "\\-")),
        ("image/svg+xml", f"<svg><text>{_entities(TOKEN, 'mixed')}</text></svg>"),
        ("application/xhtml+xml", _entities(TOKEN, "hex")),
    ],
    ids=["decimal", "hex", "mixed", "tags", "attribute", "markdown", "md-escapes", "svg", "xhtml"],
)
def test_markup_showing_a_secret_once_decoded_is_withheld(mime: str, markup: str) -> None:
    leaky = new_output("display_data", data={mime: markup, "text/plain": "<HTML object>"})
    clean = new_output("display_data", data={mime: "<b>caf&eacute; &#38; 1 &lt; 2</b>"})
    outputs = scrub_notebook(_notebook(leaky, clean), SECRETS).cells[0].outputs
    reason = outputs[0].data["text/plain"]
    assert reason.startswith("[notebook-executor: output withheld: it shows the value of secret")
    assert outputs[1].data == clean.data
    _no_trace(json.dumps(outputs))


def test_markup_holding_a_secret_plainly_is_redacted_not_withheld() -> None:
    output = new_output("display_data", data={"text/html": f"<b>{TOKEN}</b> &amp; more"})
    [scrubbed] = scrub_notebook(_notebook(output), SECRETS).cells[0].outputs
    assert scrubbed.data == {"text/html": "<b>[secret T]</b> &amp; more"}


@pytest.mark.parametrize(
    "printed",
    [
        str(UNI.encode()),
        str(UNI.encode("utf-16")),
        str(UNI.encode("utf-16-be")),
        str([UNI.encode()]),
        str(UNI.encode("unicode_escape")),
        str((UNI + "'\"").encode()),
        UNI.encode().hex(),
        UNI.encode().hex().upper(),
        TOKEN.encode("utf-16-le").hex(),
        UNI.encode("utf-16-be").hex(),
        base64.b64encode(TOKEN.encode()).decode(),
        str(base64.b64encode(b"x" + UNI.encode() + b"yz")),
        base64.urlsafe_b64encode(b"ab" + TOKEN.encode()).decode(),
        json.dumps({"k": UNI}),
        ascii(UNI),
    ],
    ids=lambda printed: printed[:24],
)
def test_the_printed_forms_of_a_secrets_bytes_are_found(printed: str) -> None:
    redacted = Redactor(SECRETS).text(f"value: {printed} end")
    assert "[secret " in redacted
    _no_trace(redacted)
    assert redacted.startswith("value: ")
    assert redacted.endswith(" end")


def test_a_redactor_without_secrets_changes_nothing() -> None:
    redactor = Redactor({})
    text = "\x1b[31m&#116;ok\x1b[0m"
    assert not redactor
    assert redactor.text(text) is text
    assert redactor.release(text) == (text, "")
    assert redactor.found_in_markup(text) is None


# -- shown live: log_output --------------------------------------------------------------------


def _printed_live(capsys: pytest.CaptureFixture[str], calls: list[tuple[int, Any]]) -> str:
    printer = OutputPrinter(SECRETS)
    for index, output in calls:
        printer(index, output)
    printer.flush()
    return capsys.readouterr().err


@pytest.mark.parametrize("cut", range(1, len(TOKEN)))
def test_log_output_masks_a_secret_cut_anywhere_across_streams_and_cells(
    capsys: pytest.CaptureFixture[str], cut: int
) -> None:
    across_streams = [(0, _stream("a " + TOKEN[:cut])), (0, _stream(TOKEN[cut:] + "\n", "stderr"))]
    across_cells = [(0, _stream("a " + TOKEN[:cut])), (1, _stream(TOKEN[cut:] + "\n"))]
    for calls in (across_streams, across_cells):
        shown = _printed_live(capsys, calls)
        assert shown == "a [secret T]\n"


def test_log_output_masks_a_secret_cut_inside_an_escape_code(
    capsys: pytest.CaptureFixture[str],
) -> None:
    calls = [(0, _stream(TOKEN[:9] + "\x1b[3")), (0, _stream("1m" + TOKEN[9:] + "\n", "stderr"))]
    assert _printed_live(capsys, calls) == "[secret T]\n"


def test_log_output_shows_at_once_what_cannot_begin_a_secret(
    capsys: pytest.CaptureFixture[str],
) -> None:
    printer = OutputPrinter(SECRETS)
    printer(0, _stream("hello\n"))
    printer(0, new_output("display_data", data={"text/plain": "a result"}))
    assert capsys.readouterr().err == "hello\na result\n"
    printer(1, _stream("key: " + TOKEN[:3]))
    assert capsys.readouterr().err == "key: "  # what could begin the secret waits
    printer.flush()
    assert capsys.readouterr().err == TOKEN[:3]  # the run ended: it was not the secret


# -- as renderers and terminals show it ----------------------------------------------------------


@pytest.mark.parametrize(
    "malformed", ["\x1b[\u00e9m", "\x1b[\x01\u00e9;m", "\x1b[\u00e9\u00e9K", "\x1b[ \u00e9?!@"]
)
def test_a_secret_behind_a_malformed_escape_is_found_as_renderers_show_it(malformed: str) -> None:
    """nbconvert and JupyterLab remove ``ESC [`` up to the next character in ``@-~``, however
    malformed what lies between: the secret they show is replaced, the codes with it."""
    text = "key " + TOKEN[:5] + malformed + TOKEN[5:] + " end"
    assert Redactor(SECRETS).text(text) == "key [secret T] end"
    # Where the renderers swallow a character of the secret, they show none: nothing to hide.
    harmless = TOKEN[:5] + "\x1b[\u00e9" + TOKEN[5:]
    assert Redactor(SECRETS).text(harmless) == harmless


@pytest.mark.parametrize(
    "markdown",
    [
        TOKEN[:5] + "*" + TOKEN[5:] + "*",
        TOKEN[:5] + "**" + TOKEN[5:] + "**",
        "[" + TOKEN[:5] + "](https://example.com)" + TOKEN[5:],
        TOKEN[:4] + "`" + TOKEN[4:9] + "`" + TOKEN[9:],
        TOKEN[:5] + "<!-- hidden -->" + TOKEN[5:],
    ],
    ids=["emphasis", "strong", "link", "code", "comment"],
)
def test_markdown_showing_a_secret_once_rendered_is_withheld(markdown: str) -> None:
    leaky = new_output("display_data", data={"text/markdown": markdown, "text/plain": "<md>"})
    clean = new_output("display_data", data={"text/markdown": "*just* [a](link) `x`"})
    outputs = scrub_notebook(_notebook(leaky, clean), SECRETS).cells[0].outputs
    assert outputs[0].data["text/plain"].startswith("[notebook-executor: output withheld")
    assert outputs[1].data == clean.data
    _no_trace(json.dumps(outputs))


def test_log_output_moves_no_cursor_back_when_there_are_secrets(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A backspace, a carriage return or a cursor move would let a terminal draw a secret's
    pieces over one another: with secrets, none is written (colours are)."""
    calls = [
        (0, _stream(TOKEN[:4] + "X\b" + TOKEN[4:] + "\n")),
        (0, _stream("XXXX" + TOKEN[4:] + "\r" + TOKEN[:4] + "\n")),
        (0, _stream(TOKEN[:4] + "X\x1b[D" + TOKEN[4:] + "\r\n")),
        (0, _stream("\x1b[31mred\x1b[0m\n")),
    ]
    shown = _printed_live(capsys, calls)
    assert shown == (
        f"{TOKEN[:4]}X{TOKEN[4:]}\nXXXX{TOKEN[4:]}\n{TOKEN[:4]}\n"
        f"{TOKEN[:4]}X{TOKEN[4:]}\n\x1b[31mred\x1b[0m\n"
    )
    # Without secrets the outputs are shown as they came.
    printer = OutputPrinter({})
    printer(0, _stream("50%\r100%\n"))
    printer.flush()
    assert capsys.readouterr().err == "50%\r100%\n"


def test_a_markdown_output_too_long_to_render_is_withheld_in_a_run_with_secrets() -> None:
    from notebook_executor._records.scrub import MAX_RENDERED_MARKDOWN

    long = "*a* " * (MAX_RENDERED_MARKDOWN // 4 + 1)
    output = new_output("display_data", data={"text/markdown": long, "text/plain": "<md>"})
    [kept] = scrub_notebook(_notebook(output), {}).cells[0].outputs
    assert kept.data["text/markdown"] == long
    [withheld] = scrub_notebook(_notebook(output), SECRETS).cells[0].outputs
    assert "not rendered to be searched" in withheld.data["text/plain"]
