"""Checks as JUnit XML, the format CI systems and reviewers read: one testsuite per command, one
testcase per check, the observed values in <system-out>, a failing check as <failure> whose message
and text carry the values it looked at. Written with junitparser (a maintained JUnit library that
also reads the files back in the tests)."""

from __future__ import annotations

import io
import json
import re
import socket
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path

from junitparser import Failure, JUnitXml, TestCase, TestSuite

from checkpoint_tui.files import write_output
from checkpoint_tui.proof.report import Check

# Characters XML 1.0 cannot carry at all (a control byte in a model answer or an SDK message)
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")
FAILURE_TYPE = "CheckFailed"


def _xml_text(text: str) -> str:
    return _NOT_XML.sub("\ufffd", text)


def _details(check: Check) -> str:
    numbers = {k: v for k, v in check.numbers.items() if v is not None}
    text = check.observed + (f"\n{json.dumps(numbers, sort_keys=True)}" if numbers else "")
    return _xml_text(text)


def junit_suite(name: str, checks: Sequence[Check], properties: Mapping[str, object] | None = None) -> TestSuite:
    suite = TestSuite(name)
    suite.timestamp = datetime.now(UTC).isoformat(timespec="seconds")
    suite.hostname = socket.gethostname()
    for key, value in (properties or {}).items():
        if value is not None:
            suite.add_property(key, _xml_text(str(value)))
    classname = name.replace(" ", ".")  # e.g. "checkpoint-tui.--verify": readers group cases by it
    for check in checks:
        case = TestCase(_xml_text(check.name), classname=classname)
        details = _details(check)
        case.system_out = details
        if not check.ok:
            failure = Failure(message=_xml_text(f"{check.name}: {check.observed}"), type_=FAILURE_TYPE)
            failure.text = details
            case.result = [failure]
        suite.add_testcase(case)
    return suite


def junit_xml(
    name: str,
    checks: Sequence[Check],
    properties: Mapping[str, object] | None = None,
    time_s: float | None = None,
) -> bytes:
    """The checks as a JUnit XML document."""
    xml = JUnitXml("checkpoint-tui")
    suite = junit_suite(name, checks, properties)
    xml.add_testsuite(suite)
    xml.update_statistics()  # the totals on <testsuites>
    if time_s is not None:  # checks have no time of their own: the command's wall time
        suite.time = xml.time = round(time_s, 3)
    rendered = io.BytesIO()
    xml.write(rendered, pretty=True)
    return rendered.getvalue()


def write_junit(
    path: Path,
    name: str,
    checks: Sequence[Check],
    properties: Mapping[str, object] | None = None,
    time_s: float | None = None,
) -> Path:
    """Written as every output is (files.write_output: never through a link)."""
    return write_output(path, junit_xml(name, checks, properties, time_s), "the JUnit file")
