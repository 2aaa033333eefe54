"""One-line error messages for the command line and for per-case records."""

from __future__ import annotations


#: ``python -m hynea_pl --debug ...``: a failing command prints its full traceback, a failed case prints its
#: traceback as it fails (it is always kept in the run folder's ``errors/<case_id>.txt``)
DEBUG = False


class ConfigMismatch(RuntimeError):
    """A rerun into an existing run folder whose ``config.yaml`` differs (the command exits 1)."""


class CampaignFailed(RuntimeError):
    """A case of a campaign failed; every record, the summary and the grids are written (the command exits 1)."""


def _callable_reason(line: str) -> str:
    """A ``model`` section's reason without jsonargparse's wrapping (the factory type and the value again):
    ``Type Callable[...] expects a function or a callable class: <reason>. Got value: ...`` -> ``<reason>``."""
    _, found, reason = line.partition(" expects a function or a callable class: ")
    return (reason if found else line).split(". Got value: Namespace(class_path=")[0]


def one_line(error: BaseException) -> str:
    """The error message on one line, naming the problem.

    jsonargparse wraps errors raised while parsing or building a component ("Parser key "model": Does not
    validate against any of the Union subtypes ... Errors: - <the real error>"): the key and the real error are
    picked out of that list and joined.
    """
    lines = [_callable_reason(line.strip()) for line in str(error).strip().splitlines() if line.strip()]
    if not lines:
        return type(error).__name__
    head = [lines[0]] if lines[0].startswith("Parser key") else []
    missing = [line for line in lines if line.startswith("- Expected a path but ")]
    if missing:  # a referenced file (``--sut other.yaml``) that is not there
        path = missing[0].removeprefix("- Expected a path but ").removesuffix(" either not accessible or invalid")
        return " ".join([*head, f"file {path} does not exist or cannot be read"])
    if not any(line.startswith("Does not validate against any of the Union subtypes") for line in lines):
        if len(lines) == 1:
            return lines[0] if lines[0] != "Unexpected config:" else "Unexpected config: the config is empty"
        if lines[0].endswith(":"):  # jsonargparse's "Parser key "x":" / "Unexpected config:": the reason follows
            reason = [line.removeprefix("- ") for line in lines[1:]
                      if not line.startswith(("Given value", "Subtypes:"))]
            return " ".join([lines[0], *reason[:2]])
        return lines[0]
    causes: list[list[str]] = []
    for line in lines[lines.index("Errors:") + 1 if "Errors:" in lines else 1:]:
        if line.startswith("Given value"):
            break
        if line.startswith("- "):
            causes.append([line[2:]])
        elif causes:
            causes[-1].append(line)
    causes = [cause for cause in causes if "Expected a <class 'NoneType'>" not in cause[0]]
    return " ".join([*head, *(causes[0] if causes else lines[1:2])])
