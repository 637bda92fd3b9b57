"""One submission's reports: the learner's feedback (Markdown) and its JUnit XML.

Takes a `Grade`; gives text. Written by the grader from its own results, never from a
file a submission could write.
"""

from __future__ import annotations

import xml.etree.ElementTree as ElementTree

from tools.grading.model import Grade


def junit_xml(grade: Grade) -> bytes:
    """One JUnit test suite per submission, one test case per TODO (written by the grader)."""
    failed = sum(not grade.passed.get(todo) for todo in grade.points)
    suite = ElementTree.Element(
        "testsuite", name=f"{grade.learner}.{grade.lab}", tests=str(len(grade.points)),
        failures=str(failed), time=f"{grade.seconds:.1f}",
    )  # fmt: skip
    for todo in sorted(grade.points):
        case = ElementTree.SubElement(suite, "testcase", classname=grade.lab, name=f"TODO {todo}")
        if not grade.passed.get(todo):
            ElementTree.SubElement(case, "failure", message=grade.messages.get(todo, ""))
    return ElementTree.tostring(suite, encoding="utf-8", xml_declaration=True)


def feedback(grade: Grade) -> str:
    """A learner's feedback, in Markdown: points, the check's message, the first error."""
    lines = [f"# Feedback: {grade.lab or 'unknown lab'}", ""]
    lines.append(f"Learner: {grade.learner} · submission: {grade.submission} · course "
                 f"version: {grade.version or 'unknown'}")  # fmt: skip
    lines.append("")
    if grade.status != "graded":
        lines += [f"Not graded: {grade.status}.", ""]
        return "\n".join(lines)
    lines += [f"**Total: {grade.total:g} / {grade.maximum} points**", "",
              "| TODO | points | result |", "| --- | --- | --- |"]  # fmt: skip
    for todo in sorted(grade.points):
        earned = grade.earned[todo]
        message = grade.messages.get(todo, "")
        if todo in grade.overridden:
            message = f"set by your instructor: {grade.overridden[todo][1]} (the check: {message})"
        message = message.replace("|", "\\|").replace("\n", " ")
        lines.append(f"| {todo} | {earned:g} / {grade.points[todo]} | {message} |")
    lines.append("")
    if grade.late_days:
        lines += [f"Handed in {grade.late_days} day(s) late: {grade.penalty_percent:g}% off, "
                  f"**final {grade.final:g} / {grade.maximum} points**.", ""]  # fmt: skip
    if grade.first_error:
        lines += [f"First error: {grade.first_error}", ""]
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
        lines.append(f"- {note}")
    if grade.flags:
        lines.append("- Your instructor will read your code: it uses "
                     f"{', '.join(grade.flags)}.")  # fmt: skip
    return "\n".join(lines).rstrip() + "\n"
