"""One submission's reports: the learner's feedback (Markdown) and its JUnit XML.

Takes a `Grade`; gives text. Written by the grader from its own results, never from a
file a submission could write. Every message is one plain line (`plain_line`), escaped
for Markdown (`markdown_text`) or by the XML writer: what a learner's error says is shown
as text, never as markup, a table row or a listing.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ElementTree
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # Only for its name: the judge imports `plain_line` with nothing else.
    from tools.grading.model import Grade

MESSAGE_CHARACTERS = 400  # A message at most; the checks' own are shorter.
ERROR_CHARACTERS = 200  # An error's "Type: first line" at most, as the judge reports it.
# Control characters (C0, C1), and what UTF-8 and XML 1.0 cannot carry: lone surrogates
# (a file name's undecodable bytes, a JSON escape), U+FFFE and U+FFFF.
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\ud800-\udfff\ufffe\uffff]")
_CONTROL_BUT_LINES = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")  # Keeps tabs and newlines.
# Markdown's markup characters that a message may hold as text: HTML, links and images,
# a table's cell border, the escape itself. Backticks and underscores stay (the checks'
# messages quote code in backticks; an underscore inside a word is no emphasis).
_MARKDOWN = str.maketrans(
    {"\\": "\\\\", "&": "&amp;", "<": "&lt;", ">": "&gt;", "[": "\\[", "]": "\\]", "|": "\\|"}
)


def plain_line(text: object, limit: int = MESSAGE_CHARACTERS) -> str:
    """`text`'s first non-blank line, control characters and runs of spaces made one
    space, cut to `limit` characters (ending in "…" where cut)."""
    lines = [line for line in str(text).splitlines() if line.strip()]
    line = " ".join(_CONTROL.sub(" ", lines[0] if lines else "").split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


def escaped(text: object) -> str:
    """`text` with each character of `_CONTROL` written out (`\\x07`, `\\udc80`): what a
    file name or an id holds, shown, in any CSV cell or XML attribute."""

    def written(found: re.Match) -> str:
        code = ord(found.group())
        return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"

    return _CONTROL.sub(written, str(text))


def spreadsheet_cell(value: object) -> str:
    """`value` as a CSV cell that no spreadsheet runs: control characters written out
    (`escaped`: a tab or a carriage return first is one no more), then a `'` before a
    leading `=`, `+`, `-` or `@`, which would start a formula (OWASP's CSV injection)."""
    text = escaped(value)
    return f"'{text}" if text.startswith(("=", "+", "-", "@")) else text


def error_line(error: BaseException) -> str:
    """An error as one plain line: its type and its message's first line."""
    return plain_line(f"{type(error).__name__}: {plain_line(error)}", ERROR_CHARACTERS)


def markdown_text(text: object) -> str:
    """`text` as one plain line that Markdown shows as written (no HTML, link or cell)."""
    return plain_line(text).translate(_MARKDOWN)


def junit_xml(grade: Grade) -> bytes:
    """One JUnit test suite per submission, one test case per TODO (written by the grader)."""
    failed = sum(not grade.passed.get(todo) for todo in grade.points)
    suite = ElementTree.Element(
        "testsuite",
        name=escaped(f"{grade.learner}.{grade.lab}"),  # The writer escapes XML's markup.
        tests=str(len(grade.points)),
        failures=str(failed),
        time=f"{grade.seconds:.1f}",
    )
    for todo in sorted(grade.points):
        case = ElementTree.SubElement(
            suite, "testcase", classname=escaped(grade.lab), name=f"TODO {todo}"
        )
        if not grade.passed.get(todo):
            message = plain_line(grade.messages.get(todo, ""))
            ElementTree.SubElement(case, "failure", message=message)
    return ElementTree.tostring(suite, encoding="utf-8", xml_declaration=True)


def feedback(grade: Grade) -> str:
    """A learner's feedback, in Markdown: points, the check's message, the first error."""
    lines = [f"# Feedback: {markdown_text(grade.lab or 'unknown lab')}", ""]
    lines.append(
        f"Learner: {markdown_text(grade.learner)} · submission: "
        f"{markdown_text(grade.submission)} · course version: "
        f"{markdown_text(grade.version or 'unknown')}"
    )
    lines.append("")
    if grade.status != "graded":
        lines += [f"Not graded: {markdown_text(grade.status)}.", ""]
        return "\n".join(lines)
    lines += [
        f"**Total: {grade.total:g} / {grade.maximum} points**",
        "",
        "| TODO | points | result |",
        "| --- | --- | --- |",
    ]
    for todo in sorted(grade.points):
        earned = grade.earned[todo]
        message = grade.messages.get(todo, "")
        if todo in grade.overridden:
            message = f"set by your instructor: {grade.overridden[todo][1]} (the check: {message})"
        lines.append(f"| {todo} | {earned:g} / {grade.points[todo]} | {markdown_text(message)} |")
    lines.append("")
    if grade.late_days:
        lines += [
            f"Handed in {grade.late_days} day(s) late: {grade.penalty_percent:g}% off, "
            f"**final {grade.final:g} / {grade.maximum} points**.",
            "",
        ]
    if grade.first_error:
        lines += [f"First error: {markdown_text(grade.first_error)}", ""]
    if grade.parameters:
        changed = ", ".join(
            f"{name}={value!r} (the lab's: {lab!r})"
            for name, (value, lab) in grade.parameters.items()
        )
        lines.append(
            f"- The grader ran your lab with other parameters than the lab's, to grade a class in "
            f"minutes: {changed}. The checks' numbers above are from that run."
        )
    for note in grade.notes:
        lines.append(f"- {markdown_text(note)}")
    if grade.flags:
        lines.append(f"- Your instructor will read your code (flagged: {', '.join(grade.flags)}).")
    for todo, text in sorted(grade.printed.items()):
        lines += ["", f"What your TODO {todo} cell printed:", "", *as_code_block(text)]
    return "\n".join(lines).rstrip() + "\n"


def as_code_block(text: str, language: str = "text") -> list[str]:
    """`text` as a fenced block that no line of it can close: its lines, shown as text.

    Control characters go before the fence is sized: two backticks, a NUL and two more
    are four backticks once a renderer drops the NUL, and would close a shorter fence."""
    shown = _CONTROL_BUT_LINES.sub("", text.rstrip())
    longest = max((len(run) for run in re.findall(r"`+", shown)), default=0)
    fence = "`" * max(3, longest + 1)
    return [fence + language, *shown.splitlines(), fence]
