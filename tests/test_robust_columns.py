"""Issue 19, the speed of `fairshare check` on a workload of 2,000,000 rows: the CSV is read in 1 MiB
pieces (`reader.text_chunks`), parsed in blocks of lines (`rows.csv_blocks`) and checked column by
column (`_columns.ColumnChecker`). Each step must give exactly what the row-by-row way gives: the
same rows at the same lines, the same result, and the same first error at the same place, whatever
the block and piece sizes.
"""

from __future__ import annotations

import gzip
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from fairshare.inputs import limits, reader, rows
from fairshare.inputs._columns import BlockCheck, ColumnChecker
from fairshare.inputs.rows import CsvBlock, Row, csv_blocks, csv_rows
from test_inputs import run_check, write_inputs

HEADER = (
    "job_id,submit,group,user,class,gpus,nodes,gpu_type,cpus,mem_gb,work,estimate,label,deadline,"
    "protected,resumable,checkpoint,stall_after"
)
GROUPS = ("product/serving", "research/arch", " research/data ", "product/eval")
CLASSES = ("train", "debug", " eval ")


def _row(i: int) -> str:
    """A good row of every column, its values varied (spellings, blanks, capped and late ones)."""
    cls = CLASSES[i % 3]
    gpus, nodes, types = [("8", "1", "H100"), ("4", "", "A100"), ("16", "2", " H100 "), ("2", "", "")][i % 4]
    return ",".join(
        (
            f"j{i}",
            str(i * 7 % 50),
            GROUPS[i % 4],
            ("", "ann", " bob ")[i % 3],
            cls,
            gpus,
            nodes,
            types,
            ("", "16", "")[i % 3] if types.strip() != "A100" else "",
            ("", "64.5")[i % 2] if types.strip() != "A100" else "",
            ("600", "1e3", " 60 ")[i % 3],
            ("", "900")[i % 2],
            ("", "High", "low", "medium")[i % 4],
            ("", "40", "7200", "")[i % 4],  # 40: before some submits (a warning)
            ("", "3h", "10m", " 90m ")[i % 4],  # 3h: capped by every class
            "" if "eval" in cls else ("", "yes", "FALSE")[i % 3],
            "" if "eval" in cls else ("", "5m")[i % 2],
            ("", "100")[i % 2],
        )
    )


def _workload(
    n: int = 40, *, at: int = 25, bad: Callable[[str], str] | None = None, ending: str = "\n"
) -> str:
    lines = [HEADER, *(_row(i) for i in range(n))]
    if bad is not None:
        lines[at] = bad(lines[at])
    return ending.join(lines) + ending


def _cell(k: int, value: str) -> Callable[[str], str]:
    """Row edit: the cell of column k (from 0) set to `value`."""

    def edit(line: str) -> str:
        cells = line.split(",")
        cells[k] = value
        return ",".join(cells)

    return edit


CHECKED = {
    "good": _workload(),
    "good-crlf": _workload(ending="\r\n"),
    "good-one-row": _workload(1),
    "required-only": "job_id,submit,group,class,gpus,work\n"
    + "".join(f"j{i},{i},{GROUPS[i % 4]},{CLASSES[i % 3]},{2 ** (i % 4)},60\n" for i in range(40)),
    "bad-gpus": _workload(bad=_cell(5, "x")),
    "duplicate-id": _workload(bad=_cell(0, "j3")),
    "unknown-group": _workload(bad=_cell(2, "research/nope")),
    "group-not-a-leaf": _workload(bad=_cell(2, "product")),
    "unknown-class": _workload(bad=_cell(4, "batch")),
    "bad-label": _workload(bad=_cell(12, "urgent")),
    "nodes-not-dividing": _workload(bad=_cell(6, "3")),
    "fits-no-pool": _workload(bad=_cell(5, "64")),
    "bad-duration": _workload(bad=_cell(14, "5x")),
    "bad-resumable": _workload(bad=_cell(15, "maybe")),
    "negative-submit": _workload(bad=_cell(1, "-1")),
    "infinite-deadline": _workload(bad=_cell(13, "inf")),
    "nan-work": _workload(bad=_cell(10, "nan")),
    "blank-work": _workload(bad=_cell(10, " ")),
    "control-in-id": _workload(bad=_cell(0, "j\x07")),
    "long-user": _workload(bad=_cell(3, "u" * 300)),
    "blank-line": _workload(bad=lambda line: "\n" + line),
    "whitespace-row": _workload(bad=lambda line: " ," * 17 + " \n" + line),
    "quote-never-closed": _workload(bad=lambda line: line + ',"open'),
    "quoted-line-break": _workload(bad=_cell(3, '"a\nb"')),
    "extra-cell": _workload(bad=lambda line: line + ",x"),
}


@pytest.fixture(params=[1, 7, 512], ids=["blocks-of-1", "blocks-of-7", "blocks-of-512"])
def block_lines(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> int:
    n: int = request.param
    monkeypatch.setattr(rows, "BLOCK_LINES", n)
    return n


#: Workloads whose every block goes the column way (the others have a row it does not take).
BY_COLUMNS = ("good", "good-crlf", "good-one-row", "required-only")
#: Workloads the reader gives row by row from the line at fault (no block holds it).
READ_BY_ROWS = ("blank-line", "quote-never-closed", "quoted-line-break", "extra-cell")


@pytest.mark.parametrize("name", list(CHECKED))
def test_check_by_columns_says_what_row_by_row_says(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, block_lines: int, name: str
) -> None:
    f = write_inputs(tmp_path, workload=CHECKED[name])
    check = ColumnChecker.check
    taken: list[bool] = []

    def counted(self: ColumnChecker, cells: list[list[str]], first_line: int) -> BlockCheck | None:
        got = check(self, cells, first_line)
        taken.append(got is not None)
        return got

    monkeypatch.setattr(ColumnChecker, "check", counted)
    by_columns = run_check(f)
    monkeypatch.setattr(ColumnChecker, "check", lambda self, cells, first_line: None)
    by_rows = run_check(f)
    assert (by_columns.exit_code, by_columns.output) == (by_rows.exit_code, by_rows.output)
    if name in BY_COLUMNS:
        assert by_rows.exit_code == 0, by_rows.output
        assert taken and all(taken), taken
    elif name not in READ_BY_ROWS:
        assert False in taken, taken  # the block of the row at fault went row by row
    if name == "good":
        assert "were capped (first: j" in by_rows.output and "before the job's submit" in by_rows.output


def test_a_workload_one_row_over_the_limit_is_refused_at_that_row_in_blocks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, block_lines: int
) -> None:
    monkeypatch.setattr(limits, "MAX_JOBS", 30)
    res = run_check(write_inputs(tmp_path, workload=_workload(31)))
    assert res.exit_code == 2
    assert "jobs.csv: line 32: more than 30 jobs in one workload (the limit)" in res.output


def _all(items: Iterator[Row | CsvBlock]) -> tuple[list[tuple[int, list[str] | None]], str]:
    """(line, cells) of every row, and the error that ended them ('' when none)."""
    out: list[tuple[int, list[str] | None]] = []
    try:
        for item in items:
            for r in item.rows() if isinstance(item, CsvBlock) else [item]:
                out.append((r.line, r.cells))
    except Exception as exc:  # the error itself is compared
        return out, f"{type(exc).__name__}: {exc}"
    return out, ""


READ = {
    "plain": _workload().encode(),
    "crlf": _workload(ending="\r\n").encode(),
    "byte-order-mark": b"\xef\xbb\xbf" + _workload().encode(),
    "no-final-line-break": _workload().encode().rstrip(b"\n"),
    "blank-lines": _workload().replace("\nj9,", "\n\n\nj9,").encode(),
    "quote-never-closed": _workload(bad=lambda line: line + ',"open').encode(),
    "quote-never-closed-last": _workload().encode() + b'j99,"1\n',
    "quoted-line-break": _workload(bad=_cell(3, '"a\nb"')).encode(),
    "lone-carriage-return": _workload(bad=_cell(3, "a\rb")).encode(),
    "line-separator": _workload(bad=_cell(3, "a\u2028b")).encode(),
    "nul": _workload(bad=_cell(3, "a\x00b")).encode(),
    "not-utf8": _workload().encode().replace(b"j30,", b"j30\xff,"),
    "not-utf8-cut": _workload().encode().replace(b"j30,", b"j30\xe2\x82,"),
    "line-too-long": _workload(bad=_cell(3, "u" * 400)).encode(),
    "gzip": gzip.compress(_workload(200).encode(), mtime=0),
    "gzip-over-the-cap": gzip.compress(_workload(2000).encode(), mtime=0),
}


@pytest.mark.parametrize("piece", [16, 100, 1 << 20], ids=["pieces-of-16", "pieces-of-100", "pieces-of-1MiB"])
@pytest.mark.parametrize("data", list(READ.values()), ids=list(READ))
def test_blocks_give_the_rows_and_errors_of_csv_rows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, block_lines: int, piece: int, data: bytes
) -> None:
    monkeypatch.setattr(reader, "_CHUNK", piece)
    monkeypatch.setattr(limits, "MAX_LINE_BYTES", 300)
    monkeypatch.setenv(reader.ENV_MAX_BYTES, str(20_000))
    p = tmp_path / "jobs.csv"
    p.write_bytes(data)
    want = _all(csv_rows(p))
    assert _all(csv_blocks(p)) == want
    joined, error = "", ""
    try:
        for text in reader.text_chunks(p):
            joined += text
    except Exception as exc:  # the error itself is compared
        error = str(exc)
    lines, line_error = "", ""
    try:
        for text in reader.text_lines(p):
            lines += text
    except Exception as exc:  # the error itself is compared
        line_error = str(exc)
    assert (joined, error) == (lines, line_error)
