"""The reward server's wire protocols: requests read and checked per protocol (ours, OpenRLHF's
``/get_reward``, SandboxFusion's ``/run_code``) and answers shaped for each, independent of the
web framework. A bad request is an ``HTTPProblem`` naming the field."""

from __future__ import annotations

import json
import math
import time
from typing import Any

from rlvr.sandbox.code.rules.languages import LANGUAGES
from rlvr.sandbox.code.rules.limits import check_caps
from rlvr.sandbox.service import BadItem, Item, parse_item
from rlvr.sandbox.serving.rewards import openrlhf_items


class HTTPProblem(Exception):
    def __init__(self, status: int, message: str, headers: dict[str, str] | None = None):
        super().__init__(message)
        self.status = status
        self.message = message
        self.headers = headers or {}


class _NonFinite:
    """Where the body held ``NaN``, ``Infinity`` or a number too large for a float."""

    def __init__(self, text: str):
        self.text = text


def read_body(body: bytes | bytearray) -> Any:
    """A request body as JSON; a non-finite number anywhere (``NaN``, ``Infinity``, ``1e999``,
    which Python's parser accepts) is refused with 422 naming where it was."""
    seen: list[str] = []

    def constant(text: str) -> _NonFinite:
        seen.append(text)
        return _NonFinite(text)

    def number(text: str) -> Any:
        value = float(text)
        return value if math.isfinite(value) else constant(text)

    try:
        value = json.loads(body, parse_constant=constant, parse_float=number)
    except (ValueError, UnicodeDecodeError) as exc:
        raise HTTPProblem(400, f"body is not valid JSON: {exc}") from exc
    if seen:
        path, bad = _find(value, lambda v: isinstance(v, _NonFinite), "body")
        raise HTTPProblem(422, f"{path}: {bad.text} is not a finite number; send a finite number")
    return value


def _find(value: Any, wanted: Any, path: str) -> tuple[str, Any] | None:
    """The first place in a JSON value (depth first) whose value, or key, ``wanted`` accepts."""
    stack = [(value, path)]
    while stack:
        node, where = stack.pop()
        if wanted(node):
            return where, node
        if isinstance(node, dict):
            for key, item in reversed(list(node.items())):
                if wanted(key):
                    return f"{where} (a key)", key
                stack.append((item, f"{where}.{key}" if where != "body" else str(key)))
        elif isinstance(node, list):
            stack.extend((item, f"{where}[{i}]") for i, item in reversed(list(enumerate(node))))
    return None


def _lone_surrogate(value: Any) -> bool:
    if not isinstance(value, str) or value.isascii():
        return False
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def _escaped(value: Any) -> Any:
    """A JSON value with every lone surrogate written as its escape text (``\\ud800``)."""
    if isinstance(value, str):
        return value.encode("utf-8", "backslashreplace").decode("utf-8")
    if isinstance(value, list):
        return [_escaped(v) for v in value]
    if isinstance(value, dict):
        return {_escaped(k): _escaped(v) for k, v in value.items()}
    return value


def unencodable_item(raw: Any, index: int) -> Item | None:
    """A request item holding text that is not Unicode (a lone surrogate, which JSON's
    ``\\ud800`` escape can carry) anywhere, its id included, is ``bad_input`` on its own, never
    the batch's failure; its id comes back with the surrogate written as escape text."""
    found = _find(raw, _lone_surrogate, f"items[{index}]")
    if found is None:
        return None
    detail = f"{found[0]}: holds a lone surrogate, which is not Unicode text; send the text as UTF-8"
    raw_id = raw.get("id", index) if isinstance(raw, dict) else index
    return Item(_escaped(raw_id), "bad", "", {"detail": detail})


def check_item_caps(item: Item, index: int, caps: dict[str, float]) -> None:
    """Refuse (``BadItem``, naming the field) a code item whose limits exceed the caps."""
    if item.kind != "code":
        return
    where = f"items[{index}]"
    try:
        check_caps(item.payload.get("limits"), caps, f"{where}.limits")
    except ValueError as exc:
        raise BadItem(str(exc)) from exc
    tests = item.payload.get("tests")
    if isinstance(tests, list):
        for number, test in enumerate(tests):
            value = test.get("time_s") if isinstance(test, dict) else None
            if isinstance(value, (int, float)) and value > caps.get("time_s", float("inf")):
                raise BadItem(
                    f"{where}.tests[{number}].time_s: {value!r} exceeds this server's cap of {caps['time_s']:g}"
                )


def grade_request(body: Any, caps: dict[str, float], max_timeout: float) -> tuple[list[Item], float]:
    """``/v1/grade``: the items (each within the limit caps) and the request's deadline."""
    if not isinstance(body, dict):
        raise HTTPProblem(422, "body: expected an object with 'items'")
    raw = body.get("items")
    if not isinstance(raw, list):
        raise HTTPProblem(422, "items: required list of {id, kind, completion, answer | tests}")
    try:
        items = [unencodable_item(r, i) or parse_item(r, i) for i, r in enumerate(raw)]
        for index, item in enumerate(items):
            check_item_caps(item, index, caps)
    except BadItem as exc:
        raise HTTPProblem(422, str(exc)) from exc
    timeout = body.get("timeout", max_timeout)
    if not isinstance(timeout, (int, float)) or isinstance(timeout, bool) or timeout <= 0:
        raise HTTPProblem(422, "timeout: must be a positive number of seconds")
    return items, time.monotonic() + min(float(timeout), max_timeout)


def openrlhf_request(body: Any, caps: dict[str, float]) -> list[Item]:
    """``/get_reward`` (OpenRLHF's remote reward protocol): one item per query."""
    if not isinstance(body, dict):
        raise HTTPProblem(422, "body: expected an object with 'query', 'prompts', 'labels'")
    queries = body.get("query")
    if not isinstance(queries, list) or not all(isinstance(q, str) for q in queries):
        raise HTTPProblem(422, "query: required list of strings (prompt + response)")
    labels = body.get("labels")
    if labels is None:
        raise HTTPProblem(422, "labels: required (set OpenRLHF's label key to the gold-answer column)")
    try:
        items = openrlhf_items(queries, body.get("prompts"), labels)
        items = [
            unencodable_item({"id": item.id, "completion": item.completion, **item.payload}, index) or item
            for index, item in enumerate(items)
        ]
        for index, item in enumerate(items):
            check_item_caps(item, index, caps)
    except (BadItem, ValueError, TypeError, KeyError) as exc:
        raise HTTPProblem(422, f"labels/prompts: {exc}") from exc
    return items


def run_code_request(body: Any, caps: dict[str, float]) -> tuple[str, str, str, dict[str, Any] | None]:
    """``/run_code`` (SandboxFusion's protocol): program, stdin, language and our limits."""
    if not isinstance(body, dict):
        raise HTTPProblem(422, "body: expected an object with 'code' and 'language'")
    code = body.get("code")
    if not isinstance(code, str):
        raise HTTPProblem(422, "code: required string")
    language = body.get("language", "python")
    if language not in LANGUAGES and language not in ("python3", "c++"):
        raise HTTPProblem(422, f"language: {language!r} is not supported here; supported: {sorted(LANGUAGES)}")
    stdin = body.get("stdin") or ""
    if not isinstance(stdin, str):
        raise HTTPProblem(422, "stdin: must be a string")
    for name, text in (("code", code), ("stdin", stdin)):
        if _lone_surrogate(text):
            raise HTTPProblem(422, f"{name}: holds a lone surrogate, which is not Unicode text; send UTF-8")
    if body.get("files"):
        raise HTTPProblem(422, "files: extra files are not supported by this server (send the program in 'code')")
    limits: dict[str, Any] = {}
    for src, dst in (("run_timeout", "time_s"), ("compile_timeout", "compile_time_s")):
        value = body.get(src)
        if value is not None:
            if not isinstance(value, (int, float)) or value <= 0:
                raise HTTPProblem(422, f"{src}: must be a positive number")
            limits[dst] = float(value)
    memory = body.get("memory_limit_MB", -1)
    if isinstance(memory, (int, float)) and not isinstance(memory, bool) and memory > 0:
        limits["memory_mb"] = int(memory)
    try:
        check_caps(limits, caps, "run_code")
    except ValueError as exc:
        names = {
            "run_code.time_s": "run_timeout",
            "run_code.compile_time_s": "compile_timeout",
            "run_code.memory_mb": "memory_limit_MB",
        }
        message = str(exc)
        for ours, theirs in names.items():
            message = message.replace(ours, theirs)
        raise HTTPProblem(422, message) from exc
    if "time_s" in limits:
        limits["wall_factor"], limits["wall_grace_s"] = 1.0, 0.5
    return code, stdin, language, limits or None


def sandbox_fusion_response(result: dict[str, Any]) -> dict[str, Any]:
    """Our run outcome in SandboxFusion's shape (what verl's ``sandbox_fusion`` client reads)."""
    compile_info = result.get("compile")
    compile_result = None
    if (
        compile_info
        and compile_info.get("status") not in (None, "ok")
        or (compile_info and "exit_code" in compile_info)
    ):
        status = (
            "TimeLimitExceeded"
            if compile_info.get("status") == "tle"
            else "Finished"
            if compile_info.get("exit_code") is not None
            else "Error"
        )
        compile_result = {
            "status": status,
            "execution_time": (compile_info.get("wall_ms") or 0) / 1000,
            "return_code": compile_info.get("exit_code", 1 if compile_info.get("status") != "ok" else 0),
            "stdout": compile_info.get("stdout", ""),
            "stderr": compile_info.get("stderr", ""),
        }
    run = result.get("run")
    run_result = None
    if run is not None:
        status = {
            "ok": "Finished",
            "re": "Finished" if run.get("signal") is None else "Error",
            "tle": "TimeLimitExceeded",
        }.get(run["status"], "Error")
        run_result = {
            "status": status,
            "execution_time": (run.get("wall_ms") or 0) / 1000,
            "return_code": run.get("exit_code")
            if run.get("exit_code") is not None
            else (-(run.get("signal") or 0) or None),
            "stdout": run.get("stdout") or "",
            "stderr": run.get("stderr") or "",
        }
    reason = result.get("reason")
    if reason == "sandbox_error" or (run is None and compile_result is None and reason not in ("compile_error",)):
        overall = "SandboxError"
    elif run_result is not None and run_result["status"] == "Finished" and run_result["return_code"] == 0:
        overall = "Success"
    else:
        overall = "Failed"
    message = "" if overall == "Success" else failure_message(result, compile_result)
    return {
        "status": overall,
        "message": message,
        "compile_result": compile_result,
        "run_result": run_result,
        "executor_pod_name": None,
        "files": {},
    }


#: What each run status means, in words (SandboxFusion clients show ``message`` to people).
RUN_STATUS_WORDS = {
    "re": "runtime error",
    "tle": "time limit exceeded",
    "mle": "memory limit exceeded",
    "ole": "output limit exceeded",
    "sandbox": "sandbox error",
}


def failure_message(result: dict[str, Any], compile_result: dict[str, Any] | None) -> str:
    """Why a ``/run_code`` run did not succeed, as a sentence: ``the program exited with code 3``,
    ``the program was killed by signal 9``, ``compilation failed (exit code 1)``, ``time limit
    exceeded``; the verifier's own detail when it has one."""
    detail = str(result.get("detail") or "").strip().split("\n", 1)[0][:300]
    run = result.get("run")
    if compile_result is not None and compile_result.get("return_code") not in (0, None):
        return f"compilation failed (exit code {compile_result['return_code']})" + (f": {detail}" if detail else "")
    if compile_result is not None and compile_result.get("status") == "TimeLimitExceeded":
        return "compilation exceeded its time limit"
    if run is not None:
        status = run.get("status")
        if status == "re":
            if run.get("signal"):
                words = f"the program was killed by signal {run['signal']}"
            else:
                words = f"the program exited with code {run.get('exit_code')}"
            stderr = [line for line in str(run.get("stderr") or "").splitlines() if line.strip()]
            said = detail if detail and detail not in ("re", "runtime_error") else (stderr[-1][:300] if stderr else "")
            return words + (f": {said}" if said else "")
        if status in RUN_STATUS_WORDS:
            return RUN_STATUS_WORDS[status] + (f": {detail}" if detail else "")
        if status not in (None, "ok"):
            return f"the program did not finish normally ({status})" + (f": {detail}" if detail else "")
    reason = str(result.get("reason") or "")
    return detail or reason.replace("_", " ") or "the run failed"
